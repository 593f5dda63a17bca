"""Syncing a company-defined dataset from the company's own PostgreSQL (issue 54, item 4), against a REAL second
database this test creates on the test cluster, read by a role that may only SELECT.

Hostile: a source that hangs (statement timeout), one that returns 10 GB (the byte cap, read through a
server-side cursor a few rows at a time), and a wrong password: each is refused cleanly, the last good data
stays and the source says why. The connection string (its password above all) is then looked for everywhere
it must never be: the audit trail, what the API shows of the source, its stored row, the log, and every file
in the data directory. Controls: the full and the incremental sync land, and the grep finds the password
where it was planted on purpose."""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from backend.audit.tables import AuditEntry
from backend.records import defined, sync
from backend.records.columns import ColumnKind
from backend.records.sync_tables import DatasetSource
from backend.records.tables import DatasetRow
from backend.settings import get_settings
from backend.tenancy.context import load_user_context_by_email
from tests.support.databases import POSTGRES_URL, _admin_sql, _owner, _with_db

pytestmark = pytest.mark.postgres


@pytest.fixture
async def source_db() -> AsyncIterator[str]:
    """A second database with a `shipments` table, and a read-only role with a password of its own."""
    name = f"t_{_owner()}_{uuid.uuid4().hex[:8]}"
    role = f"reader_{uuid.uuid4().hex[:8]}"
    password = f"pw-{uuid.uuid4().hex}"
    await _admin_sql(f'CREATE DATABASE "{name}"', f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    url = _with_db(POSTGRES_URL, name)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE shipments (ref text PRIMARY KEY, weight numeric, updated timestamptz NOT NULL);"
            "INSERT INTO shipments SELECT 'S-' || g, g * 1.5, '2026-01-01'::timestamptz + g * interval '1 minute' "
            "FROM generate_series(1, 50) g;"
            f"GRANT SELECT ON shipments TO {role};"
        )
    finally:
        await conn.close()
    base = POSTGRES_URL.split("@", 1)[1].rsplit("/", 1)[0]
    try:
        yield f"postgresql://{role}:{password}@{base}/{name}"
    finally:
        await _admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f"DROP ROLE IF EXISTS {role}")


async def _source_rows(dsn: str, sql: str) -> None:
    admin_url = _with_db(POSTGRES_URL, dsn.rsplit("/", 1)[1])
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _values(dataset_id: int) -> dict[str, str]:
    rows = await DatasetRow.select(DatasetRow.external_key, DatasetRow.values).where(
        DatasetRow.dataset == dataset_id
    )
    out = {}
    for r in rows:
        values = json.loads(r["values"]) if isinstance(r["values"], str) else r["values"]
        out[r["external_key"]] = values["weight"]
    return out


async def test_sync_from_a_real_second_database_full_incremental_and_hostile_sources(
    demo_db: str, source_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    admin = await load_user_context_by_email("admin@acme.example")
    ds = await defined.define_dataset(
        admin,
        defined.DatasetSpec(
            name="shipments",
            label="Shipments",
            columns=[
                defined.ColumnSpec("ref", ColumnKind.string),
                defined.ColumnSpec("weight", ColumnKind.number),
                defined.ColumnSpec("updated", ColumnKind.datetime),
            ],
            key_column="ref",
        ),
    )
    shown = await sync.set_source(
        ds, owner_id=admin.user_id, dsn=source_db, table="shipments", updated_at_column="updated"
    )
    assert shown["connection"] == "set (hidden)"

    first = await sync.sync_dataset(ds, actor=admin.actor)
    assert (first["added"], first["refused"]) == (50, 0)
    good = await _values(ds.id)
    assert len(good) == 50 and good["S-2"] == "3.0"

    # incremental: two rows change upstream; only they are read (the cursor moved past the others)
    await _source_rows(
        source_db, "UPDATE shipments SET weight = 999, updated = '2027-01-01' WHERE ref IN ('S-3', 'S-4')"
    )
    second = await sync.sync_dataset(ds, actor=admin.actor)
    assert (second["rows_read"], second["changed"], second["added"]) == (2, 2, 0)
    good = await _values(ds.id)
    assert good["S-3"] == "999" and good["S-5"] == "7.5"
    await _source_rows(source_db, "UPDATE shipments SET weight = 1, updated = '2028-01-01' WHERE ref = 'S-6'")

    # the source hangs: the statement timeout cancels it, nothing changes, the source says why
    monkeypatch.setattr(get_settings(), "sync_statement_timeout_seconds", 0.5)
    await sync.set_source(
        ds, owner_id=admin.user_id, dsn=None, query="SELECT *, pg_sleep(30) AS nap FROM shipments", table=""
    )
    with pytest.raises(sync.SyncRefused, match="statement timeout"):
        await sync.sync_dataset(ds, actor=admin.actor)
    assert await _values(ds.id) == good
    page = await sync.get_source(ds)
    assert page["status"] == "failed" and "statement timeout" in page["last_error"]
    assert page["last_summary"]["changed"] == 2  # the last good sync's counts stay shown

    # the source returns 10 GB (10,240 rows of 1 MiB, made as they are read): refused at the byte cap
    monkeypatch.setattr(get_settings(), "sync_statement_timeout_seconds", 30.0)
    monkeypatch.setattr(get_settings(), "sync_max_bytes", 24 * 1024 * 1024)
    await sync.set_source(
        ds,
        owner_id=admin.user_id,
        dsn=None,
        query="SELECT 'S-' || g AS ref, g AS weight, now() AS updated, repeat('x', 1048576) AS pad "
        "FROM generate_series(1, 10240) g",
    )
    with pytest.raises(sync.SyncRefused, match="MiB, the sync limit"):
        await sync.sync_dataset(ds, actor=admin.actor)
    assert await _values(ds.id) == good
    assert (await sync.get_source(ds))["status"] == "failed"

    # a wrong password: said without the connection string
    wrong = source_db.replace(":pw-", ":pwX-")
    await sync.set_source(
        ds, owner_id=admin.user_id, dsn=wrong, table="shipments", updated_at_column="updated"
    )
    with pytest.raises(sync.SyncRefused) as refused:
        await sync.sync_dataset(ds, actor=admin.actor)
    assert "user or password" in str(refused.value)

    # control: the right source again syncs (from scratch: a new connection string resets the cursor)
    await sync.set_source(
        ds, owner_id=admin.user_id, dsn=source_db, table="shipments", updated_at_column="updated"
    )
    again = await sync.sync_dataset(ds, actor=admin.actor)
    assert (again["rows_read"], again["changed"], again["unchanged"]) == (50, 1, 49)

    # on a schedule: a source whose firing fell due is synced by the dispatcher's `sync_due`, once
    await sync.set_source(
        ds, owner_id=admin.user_id, dsn=None, table="shipments", updated_at_column="updated", cron="0 * * * *"
    )
    await _source_rows(source_db, "UPDATE shipments SET weight = 2, updated = '2029-01-01' WHERE ref = 'S-7'")
    past = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    await DatasetSource.update({DatasetSource.next_sync_at: past}).where(DatasetSource.dataset == ds.id)
    assert await sync.sync_due() == [ds.id]
    assert await sync.sync_due() == []  # the firing was claimed: the next is in the future
    assert (await _values(ds.id))["S-7"] == "2"

    # the connection string never leaks: the password looked for everywhere it must not be
    password = source_db.split(":")[2].split("@")[0]
    assert password.startswith("pw-")
    audit = json.dumps(await AuditEntry.select(), default=str)
    stored = json.dumps(await DatasetSource.select(), default=str)
    answers = json.dumps([await sync.get_source(ds), again, str(refused.value)], default=str)
    logs = caplog.text
    files = [p for p in Path(get_settings().data_dir).rglob("*") if p.is_file()]
    on_disk = [p for p in files if password.encode() in p.read_bytes()]
    for where, text in (("audit", audit), ("stored source", stored), ("answers", answers), ("logs", logs)):
        assert password not in text and source_db not in text, where
    assert on_disk == []
    assert "dataset.synced" in audit and "dataset.sync_failed" in audit
    # positive control of the grep: the password planted in a log line is found
    logging.getLogger("cleanroom.test").warning("planted %s", password)
    assert password in caplog.text
