"""One visibility rule for built-in and company-defined datasets (issue 54), as a property: random people, teams,
managers, dataset permissions and rows (owner, team, visibility). For every reader, the records API, the export,
the staged file and the proposed-change check agree row for row with each other, with the rule written out
here, and with a built-in dataset (`tasks`) holding the same rows. Every example is a company of its own in the
same database, so an earlier company's rows leaking into a later one's answers would show too."""

from __future__ import annotations

import asyncio
import csv
import io
import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend import clock
from backend.actions import service as actions
from backend.errors import Forbidden
from backend.records import defined, service
from backend.records.columns import ColumnKind
from backend.records.export import visible_rows
from backend.records.tables import DatasetRow, Task
from backend.records.values import ColumnSpec
from backend.staging.service import stage
from backend.tenancy.context import OPERATOR, load_user_context
from backend.tenancy.tables import Company, PermissionSet, Team, TeamMembership, User, UserPermissionSet

LEVELS = (None, "read", "edit")
_companies = itertools.count()

member = st.fixed_dictionaries(
    {
        "teams": st.lists(
            st.tuples(st.sampled_from([0, 1]), st.booleans()), max_size=2, unique_by=lambda x: x[0]
        ),
        "level": st.sampled_from(LEVELS),
    }
)
row = st.fixed_dictionaries(
    {
        "owner": st.integers(0, 3),  # 0: the admin, else a member (modulo how many there are)
        "visibility": st.sampled_from(["private", "team", "company"]),
        "team": st.sampled_from([0, 1]),
    }
)
world = st.fixed_dictionaries(
    {"members": st.lists(member, min_size=1, max_size=3), "rows": st.lists(row, max_size=10)}
)


async def _build(w: dict[str, Any]) -> dict[str, Any]:
    n = next(_companies)
    company = (await Company.insert(Company(name=f"Prop {n}", created_at=clock.now())).returning(Company.id))[
        0
    ]["id"]
    people = []
    for i in range(len(w["members"]) + 1):
        user = User(
            company=company,
            email=f"p{i}@c{n}.example",
            name=f"p{i}",
            password_hash="-",
            role="admin" if i == 0 else "member",
        )
        people.append((await User.insert(user).returning(User.id))[0]["id"])
    teams = [
        (await Team.insert(Team(company=company, name=f"t{k}")).returning(Team.id))[0]["id"] for k in (0, 1)
    ]
    for i, m in enumerate(w["members"], start=1):
        for team, manager in m["teams"]:
            await TeamMembership.insert(TeamMembership(team=teams[team], user=people[i], is_manager=manager))
        if m["level"]:
            grants = {"ledger": m["level"], "tasks": m["level"]}
            ps = (
                await PermissionSet.insert(
                    PermissionSet(company=company, name=f"s{i}", grants=grants)
                ).returning(PermissionSet.id)
            )[0]
            await UserPermissionSet.insert(UserPermissionSet(user=people[i], permission_set=ps["id"]))
    admin = await load_user_context(people[0], auth=OPERATOR)
    spec = defined.DatasetSpec(
        "ledger",
        "Ledger",
        [ColumnSpec("k", ColumnKind.string), ColumnSpec("amount", ColumnKind.integer)],
        "k",
    )
    dataset = await defined.define_dataset(admin, spec)
    rows, owned = [], {}
    now = clock.now()
    for j, r in enumerate(w["rows"]):
        owner = people[r["owner"] % len(people)]
        team = teams[r["team"]]
        key = f"k{j}"
        owned[key] = (owner, team, r["visibility"])
        rows.append(
            {
                "k": key,
                "amount": str(j),
                "owner_email": f"p{people.index(owner)}@c{n}.example",
                "team": f"t{r['team']}",
                "visibility": r["visibility"],
            }
        )
        await Task.insert(
            Task(
                company=company,
                owner=owner,
                team=team,
                visibility=r["visibility"],
                title=key,
                status="open",
                priority="low",
                created_at=now,
                updated_at=now,
                version=1,
            )
        )
    result = await defined.upsert_rows(dataset, rows, defined.RowDefaults(people[0]))
    assert result.added == len(rows) and not result.refused, result
    return {
        "people": people,
        "owned": owned,
        "dataset": dataset,
        "levels": [None, *[m["level"] for m in w["members"]]],
    }


def _expected(ctx: Any, owned: dict[str, tuple[int, int | None, str]]) -> set[str]:
    """The rule, written out: admins see all; else company rows, rows of a team they are in or manage (or own,
    when the row's team was deleted), and private rows they own or whose owner is in a team they manage."""
    if ctx.is_admin:
        return set(owned)
    seen = set()
    for key, (owner, team, visibility) in owned.items():
        if (
            visibility == "company"
            or (visibility == "team" and team in ctx.team_ids)
            or (visibility == "team" and team is None and owner == ctx.user_id)
            or visibility == "private"
            and (owner == ctx.user_id or owner in ctx.managed_user_ids)
        ):
            seen.add(key)
    return seen


async def _views(ctx: Any, name: str, key: str, out: Path, dataset: Any) -> dict[str, set[str]]:
    """What each path shows `ctx` of dataset `name`, as keys: the records API, the export, the staged file,
    and the rows the proposed-change check lets an update through for."""
    try:
        page = await service.list_records(ctx, name, page_size=500)
    except Forbidden:
        return {"api": set(), "export": set(), "staged": set(), "actions": set(), "forbidden": {"yes"}}
    api = {item[key] for item in page.items}
    ids = {item["id"]: item[key] for item in page.items}
    export = (await visible_rows(ctx, name, 5000)).export()
    exported = set(export.values[export.columns.index(key)])
    bundle = await stage(ctx, [name], [], out)
    staged = {
        r[key] for r in csv.DictReader(io.StringIO((bundle.directory / f"datasets/{name}.csv").read_text()))
    }
    every = await (
        DatasetRow.select(DatasetRow.id, DatasetRow.external_key).where(DatasetRow.dataset == dataset.id)
        if name == "ledger"
        else Task.select(Task.id, Task.title.as_alias("external_key")).where(Task.company == ctx.company_id)
    )
    allowed = set()
    for r in every:
        parsed = {"op": "update", "record_id": r["id"], "dataset": name, "changes": {}}
        target = dataset if name == "ledger" else None
        try:
            if target is None:
                from backend.records.visibility import find_dataset

                target = await find_dataset(ctx.company_id, name)
            await actions._check_permission(ctx, parsed, target)
        except actions.ItemProblem:
            continue
        allowed.add(r["external_key"])
    assert set(ids.values()) == api
    return {"api": api, "export": exported, "staged": staged, "actions": allowed, "forbidden": set()}


@pytest.mark.sqlite
def test_every_path_agrees_with_the_rule_for_defined_and_builtin_datasets(
    empty_db: str, tmp_path: Path
) -> None:
    stages = itertools.count()

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(world)
    def check(w: dict[str, Any]) -> None:
        async def go() -> None:
            built = await _build(w)
            for person, level in zip(built["people"], built["levels"], strict=True):
                ctx = await load_user_context(person, auth=OPERATOR)
                expected = _expected(ctx, built["owned"])
                mine = await _views(ctx, "ledger", "k", tmp_path / f"s{next(stages)}", built["dataset"])
                theirs = await _views(ctx, "tasks", "title", tmp_path / f"s{next(stages)}", built["dataset"])
                if level is None and not ctx.is_admin:
                    assert mine["forbidden"] and theirs["forbidden"]  # no permission: refused, not empty
                    continue
                assert mine["api"] == mine["export"] == mine["staged"] == expected, (w, mine, expected)
                editable = expected if ctx.can("ledger", "edit") else set()
                assert mine["actions"] == editable
                # the built-in holding the same rows answers the same (its own company's tasks only)
                assert {k: v for k, v in theirs.items()} == {k: v for k, v in mine.items()}

        asyncio.run(go())

    check()
