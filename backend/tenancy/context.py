"""Who is asking: the facts every permission decision reads, loaded once per request."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.errors import Forbidden, NotAuthenticated
from backend.tenancy.tables import PermissionSet, TeamMembership, User, UserPermissionSet

ACCESS_LEVELS = {"read": 1, "edit": 2}

# How the caller authenticated. A signed-in person holds a session; the assistant holds an API token;
# the host's own commands (CLI, demo seed) act as the operator and say so. A context built without saying
# how (the worker filing a run's outputs, a schedule's owner) is nobody's: it may read, never decide.
SESSION = "session"
TOKEN = "token"
OPERATOR = "operator"
UNSTATED = "unstated"
PERSON_METHODS = frozenset({SESSION, OPERATOR})


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
    auth: str = UNSTATED  # SESSION | TOKEN | OPERATOR; UNSTATED decides nothing (never a person by default)
    session_id: int | None = None
    token_id: int | None = None
    token_scope: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_person(self) -> bool:
        """A decision needs a person: a signed-in session, or the host operator. Never an API token."""
        return self.auth in PERSON_METHODS

    @property
    def actor(self) -> str:
        """How the audit trail names this caller: who, and through what."""
        if self.auth == TOKEN:
            return f"assistant:{self.email} (token {self.token_id})"
        return self.email

    def via(self) -> dict[str, object]:
        """The authentication facts recorded with a decision."""
        if self.auth == SESSION:
            return {"auth": SESSION, "session_id": self.session_id}
        if self.auth == TOKEN:
            return {"auth": TOKEN, "token_id": self.token_id, "scope": self.token_scope}
        return {"auth": self.auth}

    def require_person(self, what: str) -> None:
        """The service-level backstop of the person-only guard: no path lets a token decide."""
        if not self.is_person:
            raise Forbidden(
                {
                    "message": f"{what} is a person's decision: sign in to the console and do it there; "
                    "an API token (the assistant's) may propose, never decide",
                    "token_id": self.token_id,
                },
                code="person_required",
            )

    def access(self, dataset: str) -> str | None:
        if self.is_admin:
            return "edit"
        return self.permissions.get(dataset)

    def can(self, dataset: str, level: str = "read") -> bool:
        granted = self.access(dataset)
        return granted is not None and ACCESS_LEVELS[granted] >= ACCESS_LEVELS[level]


async def load_user_context(user_id: int, **auth: object) -> UserContext:
    """The user's facts; `auth` (auth=, session_id=, token_id=, token_scope=) says how they signed in."""
    user = await User.select().where(User.id == user_id).first()
    if not user or not user["active"]:
        raise NotAuthenticated("this account does not exist or is disabled")
    memberships = await TeamMembership.select(TeamMembership.team, TeamMembership.is_manager).where(
        TeamMembership.user == user_id
    )
    team_ids = {m["team"] for m in memberships}
    managed = {m["team"] for m in memberships if m["is_manager"]}
    managed_users: set[int] = set()
    if managed:
        rows = await TeamMembership.select(TeamMembership.user).where(
            TeamMembership.team.is_in(list(managed))
        )
        managed_users = {r["user"] for r in rows}
    set_ids = [
        r["permission_set"]
        for r in await UserPermissionSet.select(UserPermissionSet.permission_set).where(
            UserPermissionSet.user == user_id
        )
    ]
    permissions: dict[str, str] = {}
    if set_ids:
        for row in (
            await PermissionSet.select(PermissionSet.grants)
            .where((PermissionSet.id.is_in(set_ids)) & (PermissionSet.company == user["company"]))
            .output(load_json=True)
        ):
            grants = row["grants"]
            for dataset, level in grants.items():
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
        **auth,  # type: ignore[arg-type]
    )


async def load_user_context_by_email(email: str) -> UserContext:
    """The host operator acting as `email` (`cleanroom ... --as EMAIL`): a person, by the operator's say."""
    user = await User.select(User.id).where(User.email == email.strip().lower()).first()
    if not user:
        raise NotAuthenticated(f"no user with email {email!r}")
    return await load_user_context(user["id"], auth=OPERATOR)
