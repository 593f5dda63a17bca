"""The audit trail notices any altered, deleted or reordered entry."""

from __future__ import annotations

import os
import subprocess
import sys

from backend.audit import service as audit
from backend.audit.tables import AuditEntry


async def _three(demo_db: str) -> None:
    for i in range(3):
        await audit.record("test.event", actor="system", company_id=None, data={"i": i})


async def test_fresh_seed_verifies(demo_db: str) -> None:
    result = await audit.verify()
    assert result.ok and result.checked >= 2


async def test_altered_entry_is_named(demo_db: str) -> None:
    await _three(demo_db)
    victim = await AuditEntry.select().order_by(AuditEntry.seq).offset(2).first()
    await AuditEntry.update({AuditEntry.actor: "mallory@acme.example"}).where(AuditEntry.id == victim["id"])
    result = await audit.verify()
    assert not result.ok and result.first_bad_seq == victim["seq"] and "altered" in result.reason


async def test_deleted_entry_is_noticed(demo_db: str) -> None:
    await _three(demo_db)
    victim = await AuditEntry.select().order_by(AuditEntry.seq).offset(1).first()
    await AuditEntry.delete().where(AuditEntry.id == victim["id"])
    result = await audit.verify()
    assert not result.ok and result.first_bad_seq == victim["seq"] + 1


async def test_reordered_entries_are_noticed(demo_db: str) -> None:
    await _three(demo_db)
    rows = await AuditEntry.select().order_by(AuditEntry.seq)
    a, b = rows[1], rows[2]
    fields = (
        "seq",
        "at",
        "actor",
        "action",
        "data",
        "prev_hash",
        "hash",
        "company_id",
        "subject_type",
        "subject_id",
    )
    await AuditEntry.update(
        {getattr(AuditEntry, f): b[f] for f in fields if f != "seq"} | {AuditEntry.seq: -1}
    ).where(AuditEntry.id == a["id"])
    await AuditEntry.update(
        {getattr(AuditEntry, f): a[f] for f in fields if f != "seq"} | {AuditEntry.seq: a["seq"]}
    ).where(AuditEntry.id == b["id"])
    await AuditEntry.update({AuditEntry.seq: b["seq"]}).where(AuditEntry.id == a["id"])
    assert not (await audit.verify()).ok


def test_cli_verify_exits_nonzero_after_one_row_is_altered(demo_db: str, engine: str) -> None:
    env = dict(os.environ, DATABASE_URL=demo_db)
    cli = [sys.executable, "-m", "backend", "audit", "verify"]
    ok = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    import asyncio

    async def tamper() -> None:
        from backend import db

        db.configure(demo_db)
        await AuditEntry.update({AuditEntry.action: "demo.tampered"}).where(AuditEntry.seq == 1)

    asyncio.run(tamper())
    bad = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "entry #1" in bad.stderr
