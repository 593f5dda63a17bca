"""Deleting a team keeps the company's rows (it deleted them: the team's `ON DELETE CASCADE`, and on PostgreSQL
`dataset_row`'s reference trigger). An admin deletes a team that holds rows of a built-in dataset (`tasks`),
of a company-defined one (`ledger`) and a Drive folder: every row still exists, with its owner, its team NULL;
a former member (not the owner) no longer sees the team's rows through the records API nor the export, nor
does the manager of another team the owner is in (the hostile readers); the owner still does, and so do
admins (the controls). Before the deletion the former member did see them, and the row counts before and
after are compared: run against the cascade, this test fails there. On SQLite (FOREIGN KEYs) and on
PostgreSQL (its FOREIGN KEYs, and `dataset_row`'s statement-level trigger): each engine's own mechanism."""

from __future__ import annotations

import json
from typing import Any

import pytest
from piccolo.querystring import QueryString

from backend import clock, db
from backend.audit.tables import AuditEntry
from backend.drive.tables import DriveFolder
from backend.errors import NotFound
from backend.records import defined, service
from backend.records.columns import ColumnKind
from backend.records.export import visible_rows
from backend.records.tables import DatasetRow, Task
from backend.records.values import ColumnSpec
from backend.tenancy import grid
from backend.tenancy.context import OPERATOR, UserContext, load_user_context
from backend.tenancy.tables import (
    Company,
    PermissionSet,
    Team,
    TeamMembership,
    TeamPermissionSet,
    User,
    UserPermissionSet,
)
from tests.runs.test_run_migrations import bare  # noqa: F401 - a fixture
from tests.support.migrations import _acme_and_alice, _migrate, _sql

# (key, team ("gone": the team deleted, "kept": another one), visibility); every row is alice's
ROWS = [
    ("shared-1", "gone", "team"),
    ("shared-2", "gone", "team"),
    ("everyone", "gone", "company"),
    ("hers", "gone", "private"),
    ("other-team", "kept", "team"),
]


async def _select(sql: str) -> list[dict[str, Any]]:
    return await db.engine().run_querystring(QueryString(sql))


async def _insert(table: Any, row: Any) -> int:
    return (await table.insert(row).returning(table.id))[0]["id"]


async def _world() -> dict[str, Any]:
    """A company of its own: an admin; alice (in both teams, owns every row), bob (in `gone` only), carol
    (manages `kept`, so she sees alice's private rows); each reads `tasks` and `ledger` by a grant of their
    own (a team's grants go with the team: that must not be why bob sees less)."""
    company = await _insert(Company, Company(name="Teamless", created_at=clock.now()))
    people = {
        name: await _insert(
            User,
            User(
                company=company,
                email=f"{name}@teamless.example",
                name=name,
                password_hash="-",
                role="admin" if name == "admin" else "member",
            ),
        )
        for name in ("admin", "alice", "bob", "carol")
    }
    teams = {name: await _insert(Team, Team(company=company, name=name)) for name in ("gone", "kept")}
    for team, user, manager in (("gone", "alice", False), ("gone", "bob", False), ("kept", "alice", False),
                                ("kept", "carol", True)):  # fmt: skip
        await TeamMembership.insert(TeamMembership(team=teams[team], user=people[user], is_manager=manager))
    grants = {"tasks": "read", "ledger": "read"}
    readable = await _insert(PermissionSet, PermissionSet(company=company, name="readers", grants=grants))
    for name in ("alice", "bob", "carol"):
        await UserPermissionSet.insert(UserPermissionSet(user=people[name], permission_set=readable))
    # a grant of the team's own, which goes with it (control: the deletion did happen)
    team_set = await _insert(PermissionSet, PermissionSet(company=company, name="team", grants=grants))
    await TeamPermissionSet.insert(TeamPermissionSet(team=teams["gone"], permission_set=team_set))
    admin = await load_user_context(people["admin"], auth=OPERATOR)
    spec = defined.DatasetSpec("ledger", "Ledger", [ColumnSpec("k", ColumnKind.string)], "k")
    ledger = await defined.define_dataset(admin, spec)
    now = clock.now()
    for key, team, visibility in ROWS:
        await Task.insert(
            Task(company=company, owner=people["alice"], team=teams[team], visibility=visibility, title=key,
                 status="open", priority="low", created_at=now, updated_at=now, version=1)
        )  # fmt: skip
    result = await defined.upsert_rows(
        ledger,
        [
            {"k": key, "owner_email": "alice@teamless.example", "team": team, "visibility": visibility}
            for key, team, visibility in ROWS
        ],
        defined.RowDefaults(people["admin"]),
    )
    assert result.added == len(ROWS) and not result.refused, result
    await DriveFolder.insert(
        DriveFolder(company=company, owner=people["alice"], team=teams["gone"], visibility="team", name="Plans",
                    created_at=now, updated_at=now, version=1)
    )  # fmt: skip
    return {"company": company, "people": people, "teams": teams, "ledger": ledger}


async def _ctx(w: dict[str, Any], name: str) -> UserContext:
    return await load_user_context(w["people"][name], auth=OPERATOR)


async def _seen(ctx: UserContext) -> set[str]:
    """What `ctx` sees of both datasets, through the records API's listing and through the export (a run's
    staged rows): the two must agree, and the built-in and the defined dataset must too."""
    out = {}
    for dataset, key in (("tasks", "title"), ("ledger", "k")):
        api = {r[key] for r in (await service.list_records(ctx, dataset, page_size=500)).items}
        export = (await visible_rows(ctx, dataset, 5000)).export()
        exported = set(export.values[export.columns.index(key)])
        assert api == exported, (dataset, api, exported)
        out[dataset] = api
    assert out["tasks"] == out["ledger"], out
    return out["tasks"]


async def _rows(w: dict[str, Any]) -> dict[str, list[tuple[str, int, int | None, str]]]:
    """Every row of the company's two datasets and its folders, whoever may see them: (key, owner, team,
    visibility), sorted."""
    tasks = await Task.select(Task.title, Task.owner, Task.team, Task.visibility).where(
        Task.company == w["company"]
    )
    ledger = await DatasetRow.select(
        DatasetRow.external_key, DatasetRow.owner, DatasetRow.team, DatasetRow.visibility
    ).where(DatasetRow.dataset == w["ledger"].id)
    folders = await DriveFolder.select(
        DriveFolder.name, DriveFolder.owner, DriveFolder.team, DriveFolder.visibility
    ).where(DriveFolder.company == w["company"])
    return {
        name: sorted(tuple(r.values()) for r in rows)
        for name, rows in (("tasks", tasks), ("ledger", ledger), ("folders", folders))
    }


async def test_an_admin_deleting_a_team_keeps_its_rows_with_their_owners(empty_db: str) -> None:
    w = await _world()
    alice, gone, kept = w["people"]["alice"], w["teams"]["gone"], w["teams"]["kept"]
    bob, carol = await _ctx(w, "bob"), await _ctx(w, "carol")
    # before: bob sees the team's rows through it; carol sees alice's private row (she manages her) only
    assert await _seen(bob) == {"shared-1", "shared-2", "everyone"}
    assert await _seen(carol) == {"everyone", "hers", "other-team"}
    before = await _rows(w)
    assert [len(rows) for rows in before.values()] == [5, 5, 1]

    await grid.delete_team(await _ctx(w, "admin"), gone)

    after = await _rows(w)
    # every row is still there, still alice's, same visibility; the deleted team's rows have no team
    assert after == {
        name: sorted(
            (key, owner, None if team == gone else team, visibility) for key, owner, team, visibility in rows
        )
        for name, rows in before.items()
    }
    assert after["tasks"] == sorted(
        (key, alice, kept if team == "kept" else None, visibility) for key, team, visibility in ROWS
    )
    # the hostile readers: bob, a former member, sees none of the team's rows any more (no other way in:
    # a single row is refused too); carol, who manages alice in another team, did not gain them
    bob, carol = await _ctx(w, "bob"), await _ctx(w, "carol")
    assert await _seen(bob) == {"everyone"}
    assert await _seen(carol) == {"everyone", "hers", "other-team"}
    shared = (
        await Task.select(Task.id).where((Task.company == w["company"]) & (Task.title == "shared-1")).first()
    )
    with pytest.raises(NotFound):
        await service.get_record(bob, "tasks", shared["id"])
    # the controls: the owner still sees every row of hers; an admin sees everything
    assert await _seen(await _ctx(w, "alice")) == {key for key, _, _ in ROWS}
    assert await _seen(await _ctx(w, "admin")) == {key for key, _, _ in ROWS}
    assert (await service.get_record(await _ctx(w, "alice"), "tasks", shared["id"]))["team_id"] is None
    # the team, its memberships and its grants did go
    assert not await Team.exists().where(Team.id == gone)
    assert not await TeamMembership.exists().where(TeamMembership.team == gone)
    assert not await TeamPermissionSet.exists().where(TeamPermissionSet.team == gone)
    # the audit entry says what was un-shared, per table, and how many rows lost their team
    entry = await AuditEntry.select(AuditEntry.data).where(AuditEntry.action == "team.deleted").first()
    data = json.loads(entry["data"]) if isinstance(entry["data"], str) else entry["data"]
    assert data["unshared_rows"] == {"task": 2, "dataset_row": 2, "drive_folder": 1}
    assert data["rows_kept"] == 4 + 4 + 1
    # a later re-import that says nothing of team or visibility updates the rows and keeps the teamless ones
    # their owner's; one that asks for team visibility without a team is refused, row by row (nothing written)
    again = [{"k": key, "owner_email": "alice@teamless.example"} for key, _, _ in ROWS]
    result = await defined.upsert_rows(w["ledger"], again, defined.RowDefaults(w["people"]["admin"]))
    assert not result.refused and result.unchanged == len(ROWS), result
    asks = [{"k": "shared-1", "owner_email": "alice@teamless.example", "visibility": "team"}]
    result = await defined.upsert_rows(w["ledger"], asks, defined.RowDefaults(w["people"]["admin"]))
    assert [r.reason for r in result.refused] == [
        "a team row needs a team (a `team` value, or the import's default team)"
    ]
    assert await _rows(w) == after


BEFORE = "2026-12-06T09:46:46:000000"  # the last migration with the team's ON DELETE CASCADE


@pytest.mark.sqlite  # SQLite's table rebuild is the claim (PostgreSQL alters its keys in place)
async def test_a_database_from_before_keeps_its_rows_indexes_and_folders(bare: str) -> None:  # noqa: F811
    """A database written before the migration, with rows in each kind of table it rebuilds (a Drive file in
    a folder: dropping the old folder table must not take the files with it), migrated: the same rows and
    the same indexes, and then a team's deletion keeps its rows."""
    db.configure(bare)
    await _migrate(BEFORE)
    await _acme_and_alice()
    await _sql("INSERT INTO team (id, company, name) VALUES (7, 1, 'East')")
    await _sql(
        "INSERT INTO contact (id, company, owner, team, visibility, last_name) VALUES (3, 1, 1, 7, 'team', 'Ng')"
    )
    await _sql(
        "INSERT INTO contact (id, company, owner, team, visibility, last_name) VALUES (9, 1, 1, NULL, 'company', 'Li')"
    )
    await _sql(
        "INSERT INTO drive_folder (id, company, owner, team, visibility, name) VALUES (4, 1, 1, 7, 'team', 'Plans')"
    )
    await _sql(
        "INSERT INTO drive_file (id, company, owner, team, visibility, folder, name) VALUES (5, 1, 1, 7, 'team', 4, 'q3.xlsx')"
    )
    await _sql(
        "INSERT INTO dataset_definition (id, company, name, label, key_column) VALUES (2, 1, 'ledger', 'Ledger', 'k')"
    )
    await _sql(
        'INSERT INTO dataset_row (id, company, dataset, external_key, owner, team, visibility, "values") '
        "VALUES (6, 1, 2, 'a', 1, 7, 'team', '{\"k\": \"a\"}')"
    )
    tables = ("contact", "drive_folder", "drive_file", "dataset_row")

    async def state() -> dict[str, Any]:
        rows = {t: await _select(f'SELECT * FROM "{t}" ORDER BY id') for t in tables}
        indexes = await _select(
            "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name IN "
            "('contact', 'drive_folder', 'drive_file', 'dataset_row') ORDER BY name"
        )
        return {"rows": rows, "indexes": indexes}

    before = await state()
    await _migrate("all")
    after = await state()
    assert after == before  # every row, column for column, and every index
    assert [len(after["rows"][t]) for t in tables] == [2, 1, 1, 1]
    fks = await _select("SELECT \"table\", on_delete FROM pragma_foreign_key_list('drive_file') ORDER BY 1")
    assert fks == [
        {"table": "app_user", "on_delete": "CASCADE"},
        {"table": "company", "on_delete": "CASCADE"},
        {"table": "drive_folder", "on_delete": "CASCADE"},  # a folder's files still go with it
        {"table": "team", "on_delete": "SET NULL"},
    ]

    await _sql("DELETE FROM team WHERE id = 7")
    for table in tables:
        assert await _select(f'SELECT id, owner, team FROM "{table}" WHERE team IS NOT NULL') == []
    kept = {t: [r["id"] for r in await _select(f'SELECT id FROM "{t}" ORDER BY id')] for t in tables}
    assert kept == {"contact": [3, 9], "drive_folder": [4], "drive_file": [5], "dataset_row": [6]}
