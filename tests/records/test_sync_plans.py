"""After a large first sync, the next sync's lookup of stored rows by key is planned on the key index
(`defined.refresh_statistics`; docs/imports.md, "The incremental sync after a first sync").

The cause it holds: a first sync (or import) COPYs its rows into `dataset_row` and commits; until autovacuum
gets to the table the planner has no statistics for the dataset, and planned the next sync's lookup
(`defined.EXISTING_SQL`: `dataset = $1 AND external_key = ANY($2)`) as a scan of every row of the dataset
(the rule's index on `dataset`, the keys as a filter): at 1,000,000 rows, 52,000 pages per chunk of keys,
the incremental sync's regression. Control: the same sync with the refresh switched off gets that scan, so
this test notices the refresh's removal. Structural (EXPLAIN), no timing. PostgreSQL's claim."""

from __future__ import annotations

import json
import logging

import asyncpg
import pytest

from backend.records import defined, sync
from backend.records.columns import ColumnKind
from backend.records.values import ColumnSpec
from backend.tenancy.context import load_user_context_by_email

pytestmark = pytest.mark.postgres

ROWS = defined.ANALYZE_AFTER_ADDED + 2_000
# a chunk's keys in the proportion of the bench's (5,000 of 1,000,000): a lookup that should descend the
# key index for each, not read the dataset
LOOKED_UP = [f"K-{n}" for n in range(1, ROWS, 200)]


def _index_scans(plan: dict) -> list[tuple[str, str]]:
    """(index, its condition) of every index scan in the plan tree."""
    found = []
    if "Index Name" in plan:
        found.append((plan["Index Name"], plan.get("Index Cond", "")))
    for child in plan.get("Plans", []):
        found += _index_scans(child)
    return found


async def _lookup_plan(dataset: defined.DefinedDataset) -> list[tuple[str, str]]:
    rows = await defined._run("EXPLAIN (FORMAT JSON) " + defined.EXISTING_SQL, dataset.id, LOOKED_UP)
    explained = rows[0]["QUERY PLAN"]
    return _index_scans((json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"])


async def _synced(name: str, url: str) -> defined.DefinedDataset:
    admin = await load_user_context_by_email("admin@acme.example")
    spec = defined.DatasetSpec(
        name, name.title(), [ColumnSpec("ref", ColumnKind.string), ColumnSpec("n", ColumnKind.integer)], "ref"
    )
    dataset = await defined.define_dataset(admin, spec)
    await sync.set_source(dataset, owner_id=admin.user_id, dsn=url, table="src", updated_at_column="updated")
    report = await sync.sync_dataset(dataset, actor=admin.actor)
    assert report["added"] == ROWS
    return dataset


async def test_a_large_first_sync_leaves_lookups_by_key_on_the_key_index(
    demo_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    conn = await asyncpg.connect(demo_db)  # the source: a table of the same database, read as any source
    try:
        await conn.execute(
            "CREATE TABLE src AS SELECT 'K-' || g AS ref, g AS n, "
            "TIMESTAMPTZ '2026-01-01' + g * INTERVAL '1 second' AS updated "
            f"FROM generate_series(1, {ROWS}) g"
        )
    finally:
        await conn.close()

    # control: the refresh switched off, the planner does not know the dataset and reads all of it
    async def not_refreshed(dataset: defined.DefinedDataset, added: int) -> bool:
        return False

    monkeypatch.setattr(defined, "refresh_statistics", not_refreshed)
    stale = await _synced("stale", demo_db)
    assert not any(
        index == "dataset_row_dataset_key" and "external_key" in cond
        for index, cond in await _lookup_plan(stale)
    )
    monkeypatch.undo()

    fresh = await _synced("fresh", demo_db)
    assert [index for index, cond in await _lookup_plan(fresh) if "external_key" in cond] == [
        "dataset_row_dataset_key"
    ]
    # a small sync leaves the statistics alone (an ANALYZE of a large table is not worth it for a few rows)
    assert not await defined.refresh_statistics(fresh, defined.ANALYZE_AFTER_ADDED - 1)
    # an ANALYZE refused (a role that does not own the table, a lock not granted) is logged, not raised: the
    # rows were committed before it; control: the same call without the refusal runs it
    run = defined._run

    async def refused(sql: str, *args: object) -> list[dict]:
        if sql.startswith("ANALYZE"):
            raise asyncpg.InsufficientPrivilegeError("must be owner of table dataset_row")
        return await run(sql, *args)

    monkeypatch.setattr(defined, "_run", refused)
    with caplog.at_level(logging.WARNING, logger="cleanroom.records.defined"):
        assert not await defined.refresh_statistics(fresh, 10 * ROWS)
    assert "not refreshed" in caplog.text
    monkeypatch.undo()
    assert await defined.refresh_statistics(fresh, 10 * ROWS)
