"""Who is asking: the facts every permission decision reads, loaded once per request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from backend.errors import Forbidden, NotAuthenticated
from backend.tenancy.tables import Company, User

ACCESS_LEVELS = {"read": 1, "edit": 2}

# How the caller authenticated. A signed-in person holds a session; the assistant holds an API token;
# the host's own commands (CLI, demo seed) act as the operator and say so. A context built without saying
# how (the worker filing a run's outputs, a schedule's owner) is nobody's: it may read, never decide.
SESSION = "session"
TOKEN = "token"
OPERATOR = "operator"
UNSTATED = "unstated"
PERSON_METHODS = frozenset({SESSION, OPERATOR})

# A person's role in their company. An admin runs it; a member works in it; an auditor (made one by an admin)
# reads the company's audit trail and the history of every run and flow, sees records and outputs only as
# their own permissions allow, and decides nothing: no approval, no item, no schedule, no setting, no token.
ADMIN, MEMBER, AUDITOR = "admin", "member", "auditor"
ROLES = (ADMIN, MEMBER, AUDITOR)
AUDITOR_REFUSED = "auditor_decides_nothing"


@dataclass(frozen=True)
class UserContext:
    user_id: int
    company_id: int
    email: str
    name: str
    role: str
    team_ids: frozenset[int] = frozenset()  # teams the user belongs to or manages
    managed_team_ids: frozenset[int] = frozenset()
    managed_user_ids: frozenset[int] = frozenset()  # members of the teams the user manages
    permissions: dict[str, str] = field(default_factory=dict)  # dataset -> read | edit
    # the names of the datasets the company defined (records/defined.py): a tag naming one of them is a dataset's
    # as a built-in's name is (records/visibility.py `unreadable_sources`)
    company_datasets: frozenset[str] = frozenset()
    auth: str = UNSTATED  # SESSION | TOKEN | OPERATOR; UNSTATED decides nothing (never a person by default)
    session_id: int | None = None
    token_id: int | None = None
    token_scope: str | None = None
    # an assistant connected by OAuth (tenancy/oauth.py): the person's consent its token was issued under; such a
    # caller is a TOKEN with the assistant scope as a personal token is, named by its grant instead of a token id
    grant_id: int | None = None
    # the company's row as read with the user, at the start of this request (the gates' switches and the
    # credit pool's figures, read once per request: backend/runs/gates.py `company`); None when not read
    company: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    @property
    def is_auditor(self) -> bool:
        return self.role == AUDITOR

    @property
    def sees_company_history(self) -> bool:
        """Every run, flow, schedule and audit entry of the company (not their records' or outputs' contents):
        an admin, or an auditor."""
        return self.is_admin or self.is_auditor

    @property
    def decides(self) -> bool:
        """May make a decision at all: a person (never a token), and not an auditor."""
        return self.is_person and not self.is_auditor

    @property
    def is_person(self) -> bool:
        """A decision needs a person: a signed-in session, or the host operator. Never an API token."""
        return self.auth in PERSON_METHODS

    @property
    def actor(self) -> str:
        """How the audit trail names this caller: who, and through what."""
        if self.auth == TOKEN:
            if self.grant_id is not None:
                return connector_actor(self.email, self.grant_id)
            return token_actor(self.email, self.token_id)
        return self.email

    @property
    def credential(self) -> tuple[str, int | None]:
        """The assistant's credential as the audit trail names it: (subject type, id)."""
        if self.grant_id is not None:
            return "oauth_grant", self.grant_id
        return "api_token", self.token_id

    def via(self) -> dict[str, object]:
        """The authentication facts recorded with a decision."""
        if self.auth == SESSION:
            return {"auth": SESSION, "session_id": self.session_id}
        if self.auth == TOKEN and self.grant_id is not None:
            return {"auth": TOKEN, "grant_id": self.grant_id, "scope": self.token_scope}
        if self.auth == TOKEN:
            return {"auth": TOKEN, "token_id": self.token_id, "scope": self.token_scope}
        return {"auth": self.auth}

    def require_person(self, what: str) -> None:
        """The service-level backstop of the guards (tenancy/auth.py): no path lets a token or an auditor decide."""
        if not self.is_person:
            raise Forbidden(
                {
                    "message": f"{what} is a person's decision: sign in to the console and do it there; "
                    "an API token (the assistant's) may propose, never decide",
                    "token_id": self.token_id,
                },
                code="person_required",
            )
        if self.is_auditor:
            raise auditor_refused(what)

    def access(self, dataset: str) -> str | None:
        if self.is_admin:
            return "edit"
        return self.permissions.get(dataset)

    def can(self, dataset: str, level: str = "read") -> bool:
        granted = self.access(dataset)
        return granted is not None and ACCESS_LEVELS[granted] >= ACCESS_LEVELS[level]


def auditor_refused(what: str) -> Forbidden:
    return Forbidden(
        f"{what} is a decision, and an auditor decides nothing: an auditor reads the trail and the runs' "
        "history; a company admin can take the auditor role away",
        code=AUDITOR_REFUSED,
    )


# What a context reads of the user and of their company: one query, the user joined to the company; a session
# or a token joins the same to its own row (tenancy/service.py). Written as SQL once, at import: Piccolo builds a
# joined select anew at every query (each joined column a copy), which was half of a run detail's CPU.
USER_COLUMNS = ("id", "company", "email", "name", "role", "active")
_COMPANY_COLUMNS = tuple(c._meta.db_column_name for c in Company._meta.columns)


def joined_user_sql(select: str, source: str, where: str) -> str:
    """`SELECT <select>, <the user's columns as "user.<name>">, <their company's as "user.company.<name>">
    FROM <source> JOIN app_user u ... JOIN company c ... WHERE <where>`: `source` names the table the user is
    reached from and joins `u` to it (or is `app_user u` itself); read back with `split_user_row`."""
    columns = [f'u."{name}" AS "user.{name}"' for name in USER_COLUMNS]
    columns += [f'c."{name}" AS "user.company.{name}"' for name in _COMPANY_COLUMNS]
    return (
        f"SELECT {select + ', ' if select else ''}{', '.join(columns)} FROM {source} "
        f'JOIN "company" c ON c."id" = u."company" WHERE {where}'
    )


def split_user_row(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(user, company) of a row read with `joined_user_sql`."""
    user = {name: row[f"user.{name}"] for name in USER_COLUMNS}
    company = {name: row[f"user.company.{name}"] for name in _COMPANY_COLUMNS}
    return user, company


_USER_AND_COMPANY = joined_user_sql("", '"app_user" u', 'u."id" = {}')


# Everything else a permission decision reads of the user, in one statement: the teams they belong to and
# manage, the members of the teams they manage, and the grants of their own permission sets and of their teams'
# within their company (the admins' grid: tenancy/grid.py).
_FACTS = """
SELECT 'team' AS kind, tm."team" AS ref, CASE WHEN tm."is_manager" THEN 1 ELSE 0 END AS flag, NULL AS grants
  FROM "team_membership" tm WHERE tm."user" = {}
UNION ALL
SELECT 'managed', m2."user", 0, NULL
  FROM "team_membership" m1 JOIN "team_membership" m2 ON m2."team" = m1."team"
  WHERE m1."user" = {} AND m1."is_manager"
UNION ALL
SELECT 'grants', ps."id", 0, CAST(ps."grants" AS TEXT)
  FROM "user_permission_set" ups JOIN "permission_set" ps ON ps."id" = ups."permission_set"
  WHERE ups."user" = {} AND ps."company" = {}
UNION ALL
SELECT 'grants', ps."id", 0, CAST(ps."grants" AS TEXT)
  FROM "team_membership" tm JOIN "team_permission_set" tps ON tps."team" = tm."team"
  JOIN "permission_set" ps ON ps."id" = tps."permission_set"
  WHERE tm."user" = {} AND ps."company" = {}
UNION ALL
SELECT 'dataset', NULL, 0, dd."name"
  FROM "dataset_definition" dd WHERE dd."company" = {}
"""


async def load_user_context(
    user_id: int, *, user: dict[str, Any] | None = None, company: dict[str, Any] | None = None, **auth: object
) -> UserContext:
    """The user's facts, read now (never kept between requests: a removed grant, a changed role or a switch
    turned off shows at the next one); `auth` (auth=, session_id=, token_id=, token_scope=) says how they
    signed in. Two queries: the user with their company's row (skipped when the caller read both with its
    own credential's row, `user` and `company`), and `_FACTS`."""
    if user is None or company is None:
        rows = await User.raw(_USER_AND_COMPANY, user_id)
        user, company = split_user_row(rows[0]) if rows else (None, None)
    if not user or not user["active"]:
        raise NotAuthenticated("this account does not exist or is disabled")
    team_ids: set[int] = set()
    managed: set[int] = set()
    managed_users: set[int] = set()
    permissions: dict[str, str] = {}
    defined: set[str] = set()
    facts = await User.raw(
        _FACTS, user_id, user_id, user_id, user["company"], user_id, user["company"], user["company"]
    )
    for fact in facts:
        if fact["kind"] == "team":
            team_ids.add(fact["ref"])
            if fact["flag"]:
                managed.add(fact["ref"])
        elif fact["kind"] == "managed":
            managed_users.add(fact["ref"])
        elif fact["kind"] == "dataset":
            defined.add(fact["grants"])
        else:
            grants = fact["grants"]
            for dataset, level in (json.loads(grants) if isinstance(grants, str) else grants or {}).items():
                if ACCESS_LEVELS.get(level, 0) > ACCESS_LEVELS.get(permissions.get(dataset, ""), 0):
                    permissions[dataset] = level
    return UserContext(
        user_id=user["id"],
        company_id=user["company"],
        email=user["email"],
        name=user["name"],
        role=user["role"],
        team_ids=frozenset(team_ids),
        managed_team_ids=frozenset(managed),
        managed_user_ids=frozenset(managed_users),
        permissions=permissions,
        company_datasets=frozenset(defined),
        company=company,
        **auth,  # type: ignore[arg-type]
    )


async def load_user_context_by_email(email: str) -> UserContext:
    """The host operator acting as `email` (`cleanroom ... --as EMAIL`): a person, by the operator's say."""
    user = await User.select(User.id).where(User.email == email.strip().lower()).first()
    if not user:
        raise NotAuthenticated(f"no user with email {email!r}")
    return await load_user_context(user["id"], auth=OPERATOR)


def token_actor(email: str, token_id: int | None) -> str:
    """How the audit trail names what a person's assistant did through one of their tokens (the one spelling:
    `UserContext.actor` and the review's search by person both use it)."""
    return f"assistant:{email} (token {token_id})"


def connector_actor(email: str, grant_id: int | None) -> str:
    """How the trail names what a person's assistant did through an OAuth grant of theirs (tenancy/oauth.py)."""
    return f"assistant:{email} (connector {grant_id})"
