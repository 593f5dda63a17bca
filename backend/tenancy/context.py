"""Who is asking: the facts every permission decision reads, loaded once per request."""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.errors import NotAuthenticated
from backend.tenancy.tables import PermissionSet, TeamMembership, User, UserPermissionSet

ACCESS_LEVELS = {"read": 1, "edit": 2}


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

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def access(self, dataset: str) -> str | None:
        if self.is_admin:
            return "edit"
        return self.permissions.get(dataset)

    def can(self, dataset: str, level: str = "read") -> bool:
        granted = self.access(dataset)
        return granted is not None and ACCESS_LEVELS[granted] >= ACCESS_LEVELS[level]


async def load_user_context(user_id: int) -> UserContext:
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
    )


async def load_user_context_by_email(email: str) -> UserContext:
    user = await User.select(User.id).where(User.email == email.strip().lower()).first()
    if not user:
        raise NotAuthenticated(f"no user with email {email!r}")
    return await load_user_context(user["id"])
