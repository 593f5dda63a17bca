"""Deleting the newest audit entries is noticed: the chain head is anchored outside the table.

The hostile party here can write the database (not the host's data directory): they delete the last
entries, or rewrite an entry and recompute every hash after it, which the in-table chain alone accepts."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys

import pytest

from backend import db
from backend.audit import anchor
from backend.audit import service as audit
from backend.audit.tables import AuditEntry

CLI = [sys.executable, "-m", "backend", "audit", "verify"]


async def _record(n: int) -> None:
    for i in range(n):
        await audit.record("test.event", actor="system", company_id=None, data={"i": i})


def _cli_verify(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI, env=dict(os.environ, DATABASE_URL=url), capture_output=True, text=True)


def _delete_newest(url: str, n: int) -> None:
    """What someone with the database's password does: plain SQL, no application code."""

    async def delete() -> None:
        db.configure(url)
        await AuditEntry.raw("DELETE FROM audit_entry WHERE seq > (SELECT MAX(seq) FROM audit_entry) - {}", n)

    asyncio.run(delete())


def test_cli_verify_fails_after_the_newest_three_entries_are_deleted(demo_db: str, engine: str) -> None:
    asyncio.run(_record_in(demo_db, 5))
    ok = _cli_verify(demo_db)
    assert ok.returncode == 0, ok.stderr  # positive control: the untouched chain verifies, anchored
    assert "audit chain OK" in ok.stdout and "anchor:" in ok.stdout
    _delete_newest(demo_db, 3)
    bad = _cli_verify(demo_db)
    assert bad.returncode == 1, bad.stdout
    assert "the newest 3 entries were deleted" in bad.stderr


async def _record_in(url: str, n: int) -> None:
    db.configure(url)
    await _record(n)


# the anchor's comparison with the table, in Python over plain reads, not an engine's (the anchor's path per
# database and the CLI on both engines: the two tests that take `engine`; appends on PostgreSQL: test_audit_chain,
# test_audit_batching)
@pytest.mark.sqlite
async def test_verify_notices_deleted_tail_in_process(demo_db: str) -> None:
    await _record(4)
    assert (await audit.verify()).ok
    head = (await AuditEntry.select(AuditEntry.seq).order_by(AuditEntry.seq, ascending=False).first())["seq"]
    await AuditEntry.delete().where(AuditEntry.seq > head - 2)
    result = await audit.verify()
    assert not result.ok and result.first_bad_seq == head - 1
    assert "deleted" in result.reason
    # without the anchor the shortened chain is internally consistent: the anchor is what notices
    assert (await audit._verify_chain()).ok


@pytest.mark.sqlite  # the anchor's comparison, not an engine's (see test_verify_notices_deleted_tail_in_process)
async def test_deleting_every_entry_is_noticed(demo_db: str) -> None:
    await _record(1)
    await AuditEntry.delete().where(AuditEntry.id > 0)
    result = await audit.verify()
    assert not result.ok and "deleted" in result.reason


@pytest.mark.sqlite  # the anchor's comparison, not an engine's (see test_verify_notices_deleted_tail_in_process)
async def test_a_rewritten_and_rehashed_chain_is_noticed(demo_db: str) -> None:
    await _record(3)
    last = await AuditEntry.select().order_by(AuditEntry.seq, ascending=False).first()
    forged = {**last, "actor": "mallory@acme.example"}
    forged["body_hash"] = audit.body_hash(forged)  # no secret: anyone can recompute the hashes
    forged["hash"] = audit.entry_hash(forged)
    await AuditEntry.update(
        {
            AuditEntry.actor: forged["actor"],
            AuditEntry.body_hash: forged["body_hash"],
            AuditEntry.hash: forged["hash"],
        }
    ).where(AuditEntry.id == last["id"])
    assert (await audit._verify_chain()).ok  # the in-table chain accepts the forgery
    result = await audit.verify()
    assert not result.ok and result.first_bad_seq == last["seq"] and "rewritten" in result.reason


@pytest.mark.sqlite  # the anchor's comparison, not an engine's (see test_verify_notices_deleted_tail_in_process)
async def test_the_anchor_is_one_private_line_per_entry(demo_db: str) -> None:
    await _record(1)
    path = anchor.path()

    def entry_lines() -> list[str]:  # each write also ends with its signed head (a line of its own)
        return [line for line in path.read_text().splitlines() if not line.startswith("signed ")]

    before = entry_lines()
    await _record(2)
    after = entry_lines()
    assert len(after) == len(before) + 2
    newest = await AuditEntry.select().order_by(AuditEntry.seq, ascending=False).first()
    assert after[-1] == f"{newest['seq']} {newest['hash']}"
    assert path.read_text().splitlines()[-1].startswith(f"signed {newest['seq']} {newest['hash']} ")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.sqlite  # the anchor's comparison, not an engine's (see test_verify_notices_deleted_tail_in_process)
async def test_an_empty_database_without_an_anchor_verifies(empty_db: str) -> None:
    assert not anchor.path().exists()
    result = await audit.verify()
    assert result.ok and result.checked == 0


def test_each_database_has_its_own_anchor(demo_db: str, _factories, engine: str) -> None:
    """Tests share one data directory; a fresh copy of the same seeded database starts its own anchor."""
    asyncio.run(_record_in(demo_db, 3))
    mine = anchor.path()
    other = _factories[engine].fresh(seeded=True)
    try:
        db.configure(other)
        assert anchor.path() != mine
        assert asyncio.run(audit.verify()).ok  # the other database is not judged by this one's anchor
    finally:
        db.configure(demo_db)
        _factories[engine].drop(other)


@pytest.mark.sqlite  # the anchor's comparison, not an engine's (see test_verify_notices_deleted_tail_in_process)
async def test_an_entry_slipped_in_behind_the_anchor_is_noticed(demo_db: str) -> None:
    """The review's D-M2 road for someone who can write the table: add an entry to a company's chain, hashed
    and linked as the code would (no secret is needed), but never anchored. Once a genuine entry follows it,
    the company's own check and the operator's name it; before, both pass (the positive control)."""
    from backend.tenancy.tables import Company

    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    await audit.record("test.event", actor="system", company_id=acme, data={"i": 0})
    assert (await audit.verify_company(acme)).ok and (await audit.verify()).ok
    (forged,) = audit._chained(
        [
            {
                "action": "run.approved",
                "actor": "admin@acme.example",
                "company_id": acme,
                "subject_type": "run",
                "subject_id": "99",
                "data": {},
            }
        ],
        *(await audit._tails([acme])),
    )
    await AuditEntry.insert(AuditEntry(**forged))  # into the table only
    await audit.record("test.event", actor="system", company_id=acme, data={"i": 1})  # a genuine one after
    assert (await audit._verify_chain()).ok  # the in-table chains accept it
    result = await audit.verify_company(acme)
    assert not result.ok and "not in the anchor" in result.reason, result
    assert result.first_bad_seq == forged["company_seq"]
    whole = await audit.verify()
    assert not whole.ok and whole.first_bad_seq == forged["seq"] and "not in the anchor" in whole.reason


@pytest.mark.sqlite  # the anchor's comparison, not an engine's (see test_verify_notices_deleted_tail_in_process)
async def test_an_anchor_file_edited_to_match_a_rewritten_table_is_noticed(demo_db: str) -> None:
    """Someone who can write the table and the anchor file, but cannot read the signing key (settings
    `audit_signing_key` elsewhere): they rewrite the newest entry and its anchor line to agree. The anchor's
    signed head no longer verifies; before the edit, everything passes (the positive control)."""
    await _record(3)
    assert (await audit.verify()).ok
    last = await AuditEntry.select().order_by(AuditEntry.seq, ascending=False).first()
    forged = {**last, "actor": "mallory@acme.example"}
    forged["body_hash"] = audit.body_hash(forged)
    forged["hash"] = audit.entry_hash(forged)
    await AuditEntry.update(
        {
            AuditEntry.actor: forged["actor"],
            AuditEntry.body_hash: forged["body_hash"],
            AuditEntry.hash: forged["hash"],
        }
    ).where(AuditEntry.id == last["id"])
    path = anchor.path()
    text = path.read_text().replace(last["hash"], forged["hash"])  # the entry line and the signed head's
    path.write_text(text)
    assert anchor.read()[last["seq"]] == forged["hash"] and (await audit._verify_chain()).ok
    result = await audit.verify()
    assert not result.ok and "signed head does not verify" in result.reason, result
    # restored, then an entry slipped into the table with an anchor line of its own, which no key signed
    path.write_text(text.replace(forged["hash"], last["hash"]))
    await AuditEntry.update(
        {
            AuditEntry.actor: last["actor"],
            AuditEntry.body_hash: last["body_hash"],
            AuditEntry.hash: last["hash"],
        }
    ).where(AuditEntry.id == last["id"])
    assert (await audit.verify()).ok
    (slipped,) = audit._chained(
        [
            {
                "action": "run.approved",
                "actor": "x",
                "company_id": None,
                "subject_type": "",
                "subject_id": "",
                "data": {},
            }
        ],
        *(await audit._tails([])),
    )
    await AuditEntry.insert(AuditEntry(**slipped))
    with open(path, "a") as fh:
        fh.write(f"{slipped['seq']} {slipped['hash']}\n")
    result = await audit.verify()
    assert not result.ok and "edited after its last signed head" in result.reason, result
