"""`dataset_row`'s references on PostgreSQL are checked once per statement (`records.tables.REFERENCE_CHECKS`)
instead of by four per-row FOREIGN KEYs: the same guarantees, held here as the hostile writer (a statement
naming a person, team or dataset that does not exist, or another company's dataset; a delete racing an
import) beside the controls (the same statements with good references succeed; the rows of a deleted person
or dataset go, as ON DELETE CASCADE made them go, and a deleted team's stay with no team, as ON DELETE SET NULL
keeps them). SQLite keeps its FOREIGN KEYs: PostgreSQL's claim."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from backend.records import defined
from backend.records.columns import ColumnKind
from backend.records.tables import DatasetRow
from backend.records.values import ColumnSpec
from backend.tenancy.context import load_user_context_by_email

pytestmark = pytest.mark.postgres

INSERT = (
    'INSERT INTO "dataset_row" ("company", "dataset", "external_key", "owner", "team", "visibility", "values", '
    '"created_at", "updated_at", "version") SELECT $1, $2, k, o, t, \'company\', \'{}\', now(), now(), 1 '
    "FROM unnest($3::text[], $4::integer[], $5::integer[]) AS u(k, o, t)"
)


@pytest.fixture
async def world(demo_db: str) -> AsyncIterator[dict]:
    """Acme's and Globex's `things` datasets, Acme's people and a team, and a connection of the test's own."""
    spec = defined.DatasetSpec("things", "Things", [ColumnSpec("ref", ColumnKind.string)], "ref")
    acme = await load_user_context_by_email("admin@acme.example")
    globex = await load_user_context_by_email("admin@globex.example")
    conn = await asyncpg.connect(demo_db)
    try:
        yield {
            "conn": conn,
            "url": demo_db,
            "company": acme.company_id,
            "dataset": (await defined.define_dataset(acme, spec)).id,
            "foreign_dataset": (await defined.define_dataset(globex, spec)).id,
            "admin": acme.user_id,
            "alice": (await load_user_context_by_email("alice@acme.example")).user_id,
            "team": await conn.fetchval(
                'SELECT "id" FROM "team" WHERE "company" = $1 AND "name" = \'East\'', acme.company_id
            ),
        }
    finally:
        await conn.close()


async def _keys(w: dict) -> list[str]:
    rows = await w["conn"].fetch(
        'SELECT "external_key" FROM "dataset_row" WHERE "dataset" = $1 ORDER BY 1', w["dataset"]
    )
    return [r[0] for r in rows]


async def _insert(
    w: dict, keys: list[str], owners: list[int], teams: list, dataset: int | None = None
) -> None:
    await w["conn"].execute(INSERT, w["company"], dataset or w["dataset"], keys, owners, teams)


async def test_a_statement_naming_what_does_not_exist_writes_nothing(world: dict) -> None:
    w = world
    await _insert(w, ["a", "b"], [w["admin"], w["alice"]], [None, w["team"]])  # control: good references
    assert await _keys(w) == ["a", "b"]
    for owners, teams, dataset, what in (
        ([w["admin"], 999_999], [None, None], None, "owner 999999"),
        ([w["admin"], w["admin"]], [None, 999_999], None, "team 999999"),
        ([w["admin"], w["admin"]], [None, None], 999_999, "dataset 999999"),
        # a dataset that exists, but another company's: the row's company must be its dataset's
        ([w["admin"], w["admin"]], [None, None], w["foreign_dataset"], f"dataset {w['foreign_dataset']}"),
    ):
        with pytest.raises(asyncpg.ForeignKeyViolationError, match=what):
            await _insert(w, ["c", "d"], owners, teams, dataset)
        assert await _keys(w) == ["a", "b"]  # the statement's good row is not written either
    # an UPDATE that changes a reference is checked; one that keeps them (a value's change) is not refused
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="owner 999999"):
        await w["conn"].execute(
            'UPDATE "dataset_row" SET "owner" = 999999 WHERE "dataset" = $1', w["dataset"]
        )
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="team 999999"):
        await w["conn"].execute('UPDATE "dataset_row" SET "team" = 999999 WHERE "external_key" = \'a\'')
    await w["conn"].execute(
        'UPDATE "dataset_row" SET "values" = \'{"ref": "a"}\', "owner" = $2 WHERE "dataset" = $1',
        w["dataset"],
        w["alice"],
    )
    assert await w["conn"].fetchval('SELECT count(*) FROM "dataset_row" WHERE "owner" = $1', w["alice"]) == 2


async def test_deleting_a_team_keeps_its_rows_a_person_or_a_dataset_deletes_theirs(world: dict) -> None:
    w = world
    await _insert(w, ["t1", "t2", "a1", "p1"], [w["admin"], w["admin"], w["alice"], w["admin"]],
                  [w["team"], w["team"], None, None])  # fmt: skip
    await w["conn"].execute('DELETE FROM "team" WHERE "id" = $1', w["team"])
    # the team's rows stay, with no team (ON DELETE SET NULL, as the built-in tables' team); it once deleted them
    assert await _keys(w) == ["a1", "p1", "t1", "t2"]
    assert await w["conn"].fetchval('SELECT count(*) FROM "dataset_row" WHERE "team" IS NOT NULL') == 0
    await w["conn"].execute('DELETE FROM "app_user" WHERE "id" = $1', w["alice"])
    assert await _keys(w) == ["p1", "t1", "t2"]  # alice's row went; the admin's, teamless or not, stay
    await w["conn"].execute('DELETE FROM "dataset_definition" WHERE "id" = $1', w["dataset"])
    assert await _keys(w) == []


async def test_a_person_named_by_an_uncommitted_import_cannot_be_deleted_under_it(world: dict) -> None:
    """The statement locks what it names FOR KEY SHARE, as a FOREIGN KEY's check does: a delete of the row's
    owner waits for the import (here NOWAIT: refused at once), and may go once the import has ended."""
    w = world
    other = await asyncpg.connect(w["url"])
    try:
        async with w["conn"].transaction():
            await _insert(w, ["x"], [w["alice"]], [None])
            with pytest.raises(asyncpg.LockNotAvailableError):
                await other.execute('SELECT 1 FROM "app_user" WHERE "id" = $1 FOR UPDATE NOWAIT', w["alice"])
            # control: a person the import does not name is not locked
            await other.execute('SELECT 1 FROM "app_user" WHERE "id" = $1 FOR UPDATE NOWAIT', w["admin"])
        await other.execute('SELECT 1 FROM "app_user" WHERE "id" = $1 FOR UPDATE NOWAIT', w["alice"])
    finally:
        await other.close()


async def test_a_first_import_holds_its_dataset_empty_until_it_ends(world: dict) -> None:
    """`defined.claim_empty`, which lets a first import COPY its rows in without looking any up: while the
    import's transaction holds the claim, another writer's row for that dataset waits (here: its lock_timeout
    refuses it at once); a dataset with rows is never claimed empty (control), and the writer goes through
    once the import has ended."""
    w = world
    dataset = await defined.get_defined(w["company"], "things")
    other = await asyncpg.connect(w["url"])
    try:
        await other.execute("SET lock_timeout = '50ms'")
        async with DatasetRow._meta.db.transaction():
            assert await defined.claim_empty(dataset)
            with pytest.raises(asyncpg.LockNotAvailableError):
                await other.execute(INSERT, w["company"], w["dataset"], ["sneaked"], [w["admin"]], [None])
        await other.execute(INSERT, w["company"], w["dataset"], ["after"], [w["admin"]], [None])
        async with DatasetRow._meta.db.transaction():
            assert not await defined.claim_empty(dataset)  # it has a row now
        assert await _keys(w) == ["after"]
    finally:
        await other.close()
