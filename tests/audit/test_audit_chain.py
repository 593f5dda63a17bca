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
    import asyncio

    async def anchored() -> None:  # the test's database is a copy of the seeded template: it starts its own
        from backend import db  # anchor, as `serve --new-anchor` would (an unanchored trail fails verify)
        from backend.audit import service

        db.configure(demo_db)
        assert await service.start_problem(new_anchor=True) is None

    asyncio.run(anchored())
    env = dict(os.environ, DATABASE_URL=demo_db)
    cli = [sys.executable, "-m", "backend", "audit", "verify"]
    ok = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr

    async def tamper() -> None:
        from backend import db

        db.configure(demo_db)
        await AuditEntry.update({AuditEntry.action: "demo.tampered"}).where(AuditEntry.seq == 1)

    asyncio.run(tamper())
    bad = subprocess.run(cli, env=env, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "entry #1" in bad.stderr


async def _legacy(company_id: int | None, data: dict) -> dict:
    """An entry as the code before hash form 2 wrote it: form 1 (its hash over `data` verbatim), no salt, no
    company_seq (the migration numbers it), anchored."""
    from datetime import UTC, datetime

    from backend.audit import anchor

    seq, prev, tails = await audit._tails([company_id])
    entry = {
        "seq": seq,
        "at": datetime.now(UTC),
        "company_id": company_id,
        "actor": "admin@acme.example",
        "action": "action.accepted",
        "subject_type": "action_item",
        "subject_id": str(seq),
        "data": data,
        "prev_hash": prev,
        "company_prev_hash": None if company_id is None else tails[company_id][0],
        "hash_form": 1,
    }
    entry["hash"] = audit.entry_hash(entry)
    await AuditEntry.insert(AuditEntry(**entry))
    anchor.append(seq, entry["hash"])
    return entry


async def test_a_chain_written_before_hash_form_2_keeps_verifying_after_it(empty_db: str, tmp_path) -> None:
    """The migration: entries already written keep hash form 1 and verify by it; new ones are form 2 from
    the first after the upgrade; the company numbering is filled in for the old ones; the operator's and
    the company's checks and both exports verify across the change. A form-1 entry after form 2 (a
    rewrite into the old form, whose hash covers values verbatim) is refused."""
    import importlib

    from backend.audit import export, signing
    from tests.support.audit import _verifier_module

    for company, data in ((1, {"changes": {"salary": 1}}), (None, {"i": 0}), (1, {"changes": {"salary": 2}})):
        await _legacy(company, data)
    backfill = importlib.import_module("backend.migrations.cleanroom_2026_12_06t04_12_08_000000")
    await backfill._company_seqs()
    for i in range(2):
        await audit.record("test.new", actor="system", company_id=1, data={"changes": {"salary": 3 + i}})
    rows = await AuditEntry.select().order_by(AuditEntry.seq)
    assert [r["hash_form"] for r in rows] == [1, 1, 1, 2, 2]
    assert [r["company_seq"] for r in rows] == [1, None, 2, 3, 4]
    assert rows[3]["company_prev_hash"] == rows[2]["hash"]  # the first form-2 entry links to a form-1 one
    assert (await audit.verify()).ok and (await audit.verify_company(1)).ok  # `cleanroom audit verify`'s
    verifier = _verifier_module()
    key = verifier.read_public_key(signing.public_text())
    for company in (1, None):
        target = tmp_path / f"export-{company}.jsonl"
        target.write_bytes(b"".join([line async for line in export.lines(await export.plan(company))]))
        facts = verifier.verify(str(target), key)
        assert facts["count"] == (4 if company else 5)
    # withheld from the reader: a form-1 line keeps its hash for the links, a form-2 line its digest
    target = tmp_path / "withheld.jsonl"
    target.write_bytes(b"".join([x async for x in export.lines(await export.plan(1), reveal=_nothing)]))
    facts = verifier.verify(str(target), key)
    assert facts["unchecked"] == 2 and facts["withheld"] == 2
    assert b"salary" not in target.read_bytes().replace(b'"data_withheld":["changes"]', b"")
    # hostile: an entry appended in the old form after the chain changed form
    await _legacy(1, {"changes": {"salary": 9}})
    result = await audit.verify()
    assert not result.ok and "changes form once" in result.reason
    assert not (await audit.verify_company(1)).ok


async def _nothing(rows: list[dict]) -> set[int]:
    return set()
