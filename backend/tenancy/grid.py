"""Teams and dataset permissions, run by a company's admins (issue 53).

Teams: create, rename, delete, and their members and managers (a manager sees their members' private rows:
backend/records/visibility.py). Dataset permissions are a grid: a row per team and per person, a column per
dataset, each cell `read`, `edit` or nothing. A person holds the highest level of their own row and of every
team they belong to (tenancy/context.py reads both, afresh at each request: a change shows at the next
request, and a run already approved re-checks it when it starts).

Stored as permission sets (the tables the demo seed wrote and tests still may): each team and each person
has at most one set of their own (`team:<id>`, `person:<id>`) that the grid replaces; replacing a person's
row also drops the other sets they held (the seed's named ones), so the grid is what they hold. Every change
is an admin's, in a session, in their own company, audited with what it replaced.
"""

from __future__ import annotations

import json
from typing import Any, cast

from piccolo.table import Table

from backend.audit import service as audit
from backend.errors import Conflict, Invalid, NotFound
from backend.tenancy.context import ACCESS_LEVELS, UserContext
from backend.tenancy.people import require_admin
from backend.tenancy.tables import (
    PermissionSet,
    Team,
    TeamMembership,
    TeamPermissionSet,
    User,
    UserPermissionSet,
)


def _grants(value: Any) -> dict[str, str]:
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def _merge(into: dict[str, str], grants: dict[str, str]) -> None:
    for dataset, level in grants.items():
        if ACCESS_LEVELS.get(level, 0) > ACCESS_LEVELS.get(into.get(dataset, ""), 0):
            into[dataset] = level


async def _team_in(ctx: UserContext, team_id: int) -> dict[str, Any]:
    row = await Team.select().where((Team.id == team_id) & (Team.company == ctx.company_id)).first()
    if row is None:
        raise NotFound(f"no team {team_id} in this company")
    return row


def _team_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise Invalid("a team needs a name of 1 to 100 characters")
    return name


async def list_teams(ctx: UserContext) -> list[dict[str, Any]]:
    """Every team of the company with its members (`manager` true for its managers): admins and auditors."""
    if not ctx.sees_company_history:
        from backend.errors import Forbidden

        raise Forbidden("only a company admin or an auditor can list the company's teams")
    teams = await Team.select(Team.id, Team.name).where(Team.company == ctx.company_id).order_by(Team.name)
    members = await TeamMembership.select(
        TeamMembership.team, TeamMembership.user, TeamMembership.is_manager, TeamMembership.user.email
    ).where(TeamMembership.team.company == ctx.company_id)
    by_team: dict[int, list[dict[str, Any]]] = {t["id"]: [] for t in teams}
    for m in members:
        by_team.setdefault(m["team"], []).append(
            {"user_id": m["user"], "email": m["user.email"], "manager": m["is_manager"]}
        )
    return [{**t, "members": sorted(by_team.get(t["id"], []), key=lambda m: m["email"])} for t in teams]


async def _team_view(ctx: UserContext, team_id: int) -> dict[str, Any]:
    return next(t for t in await list_teams(ctx) if t["id"] == team_id)


async def create_team(ctx: UserContext, name: str) -> dict[str, Any]:
    require_admin(ctx, "creating a team")
    name = _team_name(name)
    if await Team.exists().where((Team.company == ctx.company_id) & (Team.name == name)):
        raise Conflict(f"a team named {name!r} exists already", code="team_exists")
    async with audit.atomic():
        team = Team(company=ctx.company_id, name=name)
        await team.save()
        await audit.record(
            "team.created",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="team",
            subject_id=team.id,
            data={"name": name, **ctx.via()},
        )
    return await _team_view(ctx, team.id)


async def rename_team(ctx: UserContext, team_id: int, name: str) -> dict[str, Any]:
    require_admin(ctx, "renaming a team")
    team = await _team_in(ctx, team_id)
    name = _team_name(name)
    if name != team["name"]:
        if await Team.exists().where((Team.company == ctx.company_id) & (Team.name == name)):
            raise Conflict(f"a team named {name!r} exists already", code="team_exists")
        async with audit.atomic():
            await Team.update({Team.name: name}).where(Team.id == team_id)
            await audit.record(
                "team.renamed",
                actor=ctx.actor,
                company_id=ctx.company_id,
                subject_type="team",
                subject_id=team_id,
                data={"from": team["name"], "to": name, **ctx.via()},
            )
    return await _team_view(ctx, team_id)


def team_row_tables() -> list[type[Table]]:
    """Every table whose rows a team may be given (owner, team, visibility): the built-in records, Drive's
    folders and files, `dataset_row`. Their `team` is ON DELETE SET NULL; memberships and grants cascade.
    Read from the foreign keys that point at `team` (every table module is imported by `backend.db` before a
    request is served; tenancy sits below those packages and names none of them)."""
    tables = {column._meta.table for column in Team._meta.foreign_key_references}
    return sorted((t for t in tables if hasattr(t, "visibility")), key=lambda t: t._meta.tablename)


async def _team_rows(team_id: int) -> dict[str, dict[str, int]]:
    """{table: {visibility: rows}} of the rows given to the team, tables without any left out."""
    counts: dict[str, dict[str, int]] = {}
    for table in team_row_tables():
        name = table._meta.tablename
        rows = await table.raw(
            f'SELECT "visibility", COUNT(*) AS "n" FROM "{name}" WHERE "team" = {{}} GROUP BY "visibility"',
            team_id,
        )
        if rows:
            counts[name] = {r["visibility"]: int(r["n"]) for r in rows}
    return counts


async def delete_team(ctx: UserContext, team_id: int) -> None:
    """The team, its memberships and its grants go; rows shared with the team (visibility `team`) stay with
    their owners and are seen by nobody through it any more: every row given to the team keeps existing, its
    team NULL (the tables' ON DELETE SET NULL; on PostgreSQL `dataset_row`'s trigger, records/tables.py), and
    a `team` row without a team is seen by its owner and by those who see everything (records/visibility.py).
    The audit entry says how many rows were un-shared, per table."""
    require_admin(ctx, "deleting a team")
    team = await _team_in(ctx, team_id)
    async with audit.atomic():
        rows = await _team_rows(team_id)
        sets = await TeamPermissionSet.select(TeamPermissionSet.permission_set).where(
            TeamPermissionSet.team == team_id
        )
        await TeamPermissionSet.delete().where(TeamPermissionSet.team == team_id)
        own = [s["permission_set"] for s in sets]
        if own:
            await PermissionSet.delete().where(
                PermissionSet.id.is_in(own) & (PermissionSet.name == f"team:{team_id}")
            )
        members = await TeamMembership.count().where(TeamMembership.team == team_id)
        await TeamMembership.delete().where(TeamMembership.team == team_id)
        await Team.delete().where(Team.id == team_id)
        await audit.record(
            "team.deleted",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="team",
            subject_id=team_id,
            data={
                "name": team["name"],
                "members": members,
                # rows that were shared with the team and now are their owners' alone, per table
                "unshared_rows": {t: n["team"] for t, n in rows.items() if n.get("team")},
                # every row that named the team (any visibility), kept with no team
                "rows_kept": sum(sum(n.values()) for n in rows.values()),
                **ctx.via(),
            },
        )


async def set_members(ctx: UserContext, team_id: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    """Replace the team's members: [{user_id, manager}], each a person of this company."""
    require_admin(ctx, "changing a team's members")
    await _team_in(ctx, team_id)
    wanted: dict[int, bool] = {}
    for m in members:
        wanted[int(m["user_id"])] = bool(m.get("manager", False))
    if wanted:
        found = await User.select(User.id).where(
            User.id.is_in(sorted(wanted)) & (User.company == ctx.company_id)
        )
        missing = sorted(set(wanted) - {r["id"] for r in found})
        if missing:
            raise NotFound(f"no person {missing[0]} in this company")
    before = {
        r["user"]: r["is_manager"]
        for r in await TeamMembership.select(TeamMembership.user, TeamMembership.is_manager).where(
            TeamMembership.team == team_id
        )
    }
    if before != wanted:
        async with audit.atomic():
            await TeamMembership.delete().where(TeamMembership.team == team_id)
            for user_id, manager in sorted(wanted.items()):
                await TeamMembership(team=team_id, user=user_id, is_manager=manager).save()
            await audit.record(
                "team.members_changed",
                actor=ctx.actor,
                company_id=ctx.company_id,
                subject_type="team",
                subject_id=team_id,
                data={
                    "added": sorted(set(wanted) - set(before)),
                    "removed": sorted(set(before) - set(wanted)),
                    "managers": sorted(u for u, m in wanted.items() if m),
                    **ctx.via(),
                },
            )
    return await _team_view(ctx, team_id)


# --- the grid ------------------------------------------------------------------------------------------------


async def read_grid(ctx: UserContext, datasets: list[str]) -> dict[str, Any]:
    """{datasets, teams: [{id, name, grants}], people: [{id, email, name, role, grants}]}: each row what it
    holds directly (a person's effective access also includes their teams'; an admin holds every dataset)."""
    if not ctx.sees_company_history:
        from backend.errors import Forbidden

        raise Forbidden("only a company admin or an auditor can read the company's permissions")
    teams = await Team.select(Team.id, Team.name).where(Team.company == ctx.company_id).order_by(Team.name)
    people = (
        await User.select(User.id, User.email, User.name, User.role, User.active)
        .where(User.company == ctx.company_id)
        .order_by(User.email)
    )
    team_grants: dict[int, dict[str, str]] = {t["id"]: {} for t in teams}
    for row in await TeamPermissionSet.select(
        TeamPermissionSet.team, TeamPermissionSet.permission_set.grants
    ).where(TeamPermissionSet.team.company == ctx.company_id):
        _merge(team_grants.setdefault(row["team"], {}), _grants(row["permission_set.grants"]))
    person_grants: dict[int, dict[str, str]] = {p["id"]: {} for p in people}
    for row in await UserPermissionSet.select(
        UserPermissionSet.user, UserPermissionSet.permission_set.grants
    ).where(
        (UserPermissionSet.user.company == ctx.company_id)
        & (UserPermissionSet.permission_set.company == ctx.company_id)
    ):
        _merge(person_grants.setdefault(row["user"], {}), _grants(row["permission_set.grants"]))
    return {
        "datasets": list(datasets),
        "teams": [{**t, "grants": team_grants.get(t["id"], {})} for t in teams],
        "people": [{**p, "grants": person_grants.get(p["id"], {})} for p in people],
    }


def _clean_row(grants: dict[str, Any], datasets: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for dataset, level in grants.items():
        if dataset not in datasets:
            raise Invalid(f"unknown dataset {dataset!r}; datasets: {', '.join(datasets)}")
        if level in (None, "", "none"):
            continue
        if level not in ACCESS_LEVELS:
            raise Invalid(f"{dataset}: access is read, edit or none, not {level!r}")
        out[dataset] = level
    return out


async def replace_grid(
    ctx: UserContext,
    datasets: list[str],
    *,
    teams: dict[int, dict[str, Any]],
    people: dict[int, dict[str, Any]],
) -> dict[str, Any]:
    """Replace the rows given (a team's or a person's grants, whole); rows not given stay as they are."""
    require_admin(ctx, "changing dataset permissions")
    team_rows = {int(k): _clean_row(v, datasets) for k, v in teams.items()}
    person_rows = {int(k): _clean_row(v, datasets) for k, v in people.items()}
    if team_rows:
        found = await Team.select(Team.id).where(
            Team.id.is_in(sorted(team_rows)) & (Team.company == ctx.company_id)
        )
        missing = sorted(set(team_rows) - {r["id"] for r in found})
        if missing:
            raise NotFound(f"no team {missing[0]} in this company")
    if person_rows:
        found = await User.select(User.id).where(
            User.id.is_in(sorted(person_rows)) & (User.company == ctx.company_id)
        )
        missing = sorted(set(person_rows) - {r["id"] for r in found})
        if missing:
            raise NotFound(f"no person {missing[0]} in this company")
    before = await read_grid(ctx, datasets)
    old_teams = {t["id"]: t["grants"] for t in before["teams"]}
    old_people = {p["id"]: p["grants"] for p in before["people"]}
    changes: list[dict[str, Any]] = []
    async with audit.atomic():
        for team_id, grants in sorted(team_rows.items()):
            if grants == old_teams.get(team_id, {}):
                continue
            await _replace_team(ctx.company_id, team_id, grants)
            changes.append({"team": team_id, "from": old_teams.get(team_id, {}), "to": grants})
        for user_id, grants in sorted(person_rows.items()):
            if grants == old_people.get(user_id, {}):
                continue
            await _replace_person(ctx.company_id, user_id, grants)
            changes.append({"person": user_id, "from": old_people.get(user_id, {}), "to": grants})
        if changes:
            await audit.record(
                "permissions.changed",
                actor=ctx.actor,
                company_id=ctx.company_id,
                subject_type="company",
                subject_id=ctx.company_id,
                data={"changes": changes, **ctx.via()},
            )
    return await read_grid(ctx, datasets)


async def _own_set(company_id: int, name: str, grants: dict[str, str]) -> int | None:
    """The permission set `name` of the company with these grants (made or updated); None when empty."""
    existing = (
        await PermissionSet.select(PermissionSet.id)
        .where((PermissionSet.company == company_id) & (PermissionSet.name == name))
        .first()
    )
    if not grants:
        if existing:
            await PermissionSet.delete().where(PermissionSet.id == existing["id"])
        return None
    if existing:
        await PermissionSet.update({PermissionSet.grants: grants}).where(PermissionSet.id == existing["id"])
        return cast(int, existing["id"])
    row = PermissionSet(company=company_id, name=name, grants=grants)
    await row.save()
    return row.id


async def _replace_team(company_id: int, team_id: int, grants: dict[str, str]) -> None:
    await TeamPermissionSet.delete().where(TeamPermissionSet.team == team_id)
    set_id = await _own_set(company_id, f"team:{team_id}", grants)
    if set_id is not None:
        await TeamPermissionSet(team=team_id, permission_set=set_id).save()


async def _replace_person(company_id: int, user_id: int, grants: dict[str, str]) -> None:
    await UserPermissionSet.delete().where(UserPermissionSet.user == user_id)
    set_id = await _own_set(company_id, f"person:{user_id}", grants)
    if set_id is not None:
        await UserPermissionSet(user=user_id, permission_set=set_id).save()


# --- the demo seed -------------------------------------------------------------------------------------------


async def seed_team(company_id: int, name: str, members: list[tuple[int, bool]]) -> int:
    """A team with its members, as the demo seed makes them (no admin, no audit: the seed is the operator's)."""
    team = Team(company=company_id, name=_team_name(name))
    await team.save()
    for user_id, manager in members:
        await TeamMembership(team=team.id, user=user_id, is_manager=manager).save()
    return team.id


async def seed_permission_sets(
    company_id: int, sets: dict[str, dict[str, str]], assignment: dict[int, list[str]]
) -> None:
    """The demo's named permission sets and who holds them (the grid shows them merged per person)."""
    ids: dict[str, int] = {}
    for name, grants in sets.items():
        row = PermissionSet(company=company_id, name=name, grants=grants)
        await row.save()
        ids[name] = row.id
    for user_id, names in assignment.items():
        for name in names:
            await UserPermissionSet(user=user_id, permission_set=ids[name]).save()
