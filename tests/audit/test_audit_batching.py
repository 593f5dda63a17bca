"""Entries recorded at the same moment are committed together (issue 30: one commit and one fsync per
entry, under the process's append lock, capped proposals at about ten a second), and the chain stays
what it was: gapless seqs, every entry linked to the one before it and to its company's previous one,
every entry anchored before `record` returns, and an entry the database refuses failing only its own
caller."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import asyncpg
import pytest

from backend import db
from backend.audit import anchor
from backend.audit import service as audit
from backend.audit.tables import AuditEntry

COMPANIES = (1, 2, None)


async def _record_at_once(n: int, tag: str) -> list[dict]:
    return await asyncio.gather(
        *(
            audit.record(
                "test.batched", actor="system", company_id=COMPANIES[i % 3], subject_id=i, data={"t": tag}
            )
            for i in range(n)
        )
    )


async def _assert_chain_holds(expected_new: int, before: int) -> None:
    rows = await AuditEntry.select(AuditEntry.seq, AuditEntry.hash).order_by(AuditEntry.seq)
    assert [r["seq"] for r in rows] == list(range(1, before + expected_new + 1))  # gapless, none lost
    assert (await audit.verify()).ok
    for company in (1, 2):
        assert (await audit.verify_company(company)).ok
    anchored = await asyncio.to_thread(anchor.read)
    assert all(anchored.get(r["seq"]) == r["hash"] for r in rows[before:])  # each one anchored


async def _count_appends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = audit._append

    async def counting(batch: list[dict], **kwargs: bool) -> list[dict]:
        sizes.append(len(batch))
        return await real(batch, **kwargs)

    monkeypatch.setattr(audit, "_append", counting)
    return sizes


async def test_entries_recorded_at_once_share_commits_and_the_chain_holds(
    demo_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await AuditEntry.count()
    sizes = await _count_appends(monkeypatch)
    entries = await _record_at_once(150, "together")
    # inside `atomic` an entry joins its caller's transaction, as before, between the batches
    async with audit.atomic():
        inside = await audit.record("test.atomic", actor="system", company_id=1)
    await _assert_chain_holds(151, before)
    assert [e["subject_id"] for e in entries] == [str(i) for i in range(150)]  # each caller its own entry
    assert sorted(e["seq"] for e in entries) == list(range(before + 1, before + 151))
    assert inside["seq"] == before + 151
    assert sum(sizes) == 151 and len(sizes) < 20, sizes  # 150 entries in a few inserts, not 150


async def test_positive_control_batches_of_one_hold_the_chain_and_the_count_notices(
    demo_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter above would notice entries inserted one at a time: here every batch is one entry."""
    monkeypatch.setattr(audit, "BATCH", 1)
    before = await AuditEntry.count()
    sizes = await _count_appends(monkeypatch)
    await _record_at_once(30, "one by one")
    await _assert_chain_holds(30, before)
    assert sizes == [1] * 30


@pytest.mark.postgres
async def test_an_entry_the_database_refuses_fails_only_its_caller(demo_db: str) -> None:
    before = await AuditEntry.count()
    good = [audit.record("test.good", actor="system", company_id=1, subject_id=i) for i in range(20)]
    bad = audit.record("test.bad", actor="x" * 300, company_id=2)  # longer than the column (254)
    results = await asyncio.gather(*good[:10], bad, *good[10:], return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert len(failed) == 1 and results[10] is failed[0]
    await _assert_chain_holds(20, before)


APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from backend import db
    from backend.audit import service as audit

    async def main():
        db.configure(sys.argv[1])
        await db.start_pool()
        await asyncio.gather(*(
            audit.record("test.process", actor=sys.argv[2], company_id=1 + i % 2, subject_id=i)
            for i in range(int(sys.argv[3]))
        ))

    asyncio.run(main())
    """
)


@pytest.mark.postgres
async def test_two_processes_appending_at_once_keep_one_chain(demo_db: str, tmp_path) -> None:
    """Batches of two processes take the same seqs; the loser reads the new tail and chains after it."""
    before = await AuditEntry.count()
    env = dict(os.environ, CLEANROOM_DATA_DIR=os.environ.get("CLEANROOM_DATA_DIR", str(tmp_path)))
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", APPENDER, demo_db, f"proc{k}", "120", env=env, stderr=subprocess.PIPE
        )
        for k in range(2)
    ]
    errors = [(await p.communicate())[1].decode()[-2000:] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    rows = await AuditEntry.select(AuditEntry.seq, AuditEntry.actor).order_by(AuditEntry.seq)
    assert [r["seq"] for r in rows] == list(range(1, before + 241))
    assert sum(r["actor"] == "proc0" for r in rows) == sum(r["actor"] == "proc1" for r in rows) == 120
    assert (await audit.verify()).ok
    assert (await audit.verify_company(1)).ok and (await audit.verify_company(2)).ok


async def test_an_entry_recorded_inside_the_callers_transaction_lands_or_not_with_it(demo_db: str) -> None:
    """Batched entries commit on their own; an entry recorded inside a transaction of the caller's stays
    in it: rolled back with it, and committed with it, as before."""
    before = await AuditEntry.count()

    class Undo(Exception):
        pass

    with pytest.raises(Undo):
        async with AuditEntry._meta.db.transaction():
            await audit.record("test.rolled_back", actor="system", company_id=1)
            raise Undo
    assert await AuditEntry.count() == before  # control below: the same entry outside a rollback lands
    async with AuditEntry._meta.db.transaction():
        kept = await audit.record("test.kept", actor="system", company_id=1)
    assert kept["seq"] == before + 1
    await _assert_chain_holds(1, before)


def test_the_audit_bench_compares_both_ways_of_committing_and_verifies_each(tmp_path) -> None:
    """`cleanroom bench audit` at a small size: both modes append every entry and leave a chain that
    verifies (the figures themselves are the bench's, not asserted here)."""
    from backend.benches.audit import bench_audit

    result = bench_audit(concurrent=10, entries=60)
    assert result["database"] == "sqlite"
    for mode in ("one_commit_per_entry", "recorded_together_committed_together"):
        assert result[mode]["chain_verifies"] is True, result
        assert result[mode]["entries_per_second"] > 0
    assert result["ratio_together_to_one_by_one"] is not None


async def test_an_entry_is_not_held_up_by_a_transaction_still_running_on_postgresql(demo_db: str) -> None:
    """On PostgreSQL a transaction's entries are inserted at its end, the process's append lock held only for
    those inserts and the commit (issue 30: held for whole transactions, it made every VM start and result
    of a fleet wait in one line). So while one transaction's body still runs, another entry is recorded and
    committed. Control, on SQLite: there the lock is taken before BEGIN (SQLite's one writer), and the same
    entry waits until the transaction ends, which the test sees."""
    before = await AuditEntry.count()
    inside, go_on = asyncio.Event(), asyncio.Event()

    async def slow_transaction() -> None:
        async with audit.atomic():
            await audit.record("test.slow", actor="system", company_id=1)
            inside.set()
            await go_on.wait()

    slow = asyncio.create_task(slow_transaction())
    await inside.wait()
    meanwhile = asyncio.create_task(audit.record("test.meanwhile", actor="system", company_id=2))
    done, _ = await asyncio.wait([meanwhile], timeout=10 if db.is_postgres() else 1)
    if db.is_postgres():
        assert meanwhile in done
    else:  # the control: held behind the open transaction
        assert not done
    go_on.set()
    await slow
    await meanwhile
    await _assert_chain_holds(2, before)
    order = [r["action"] for r in await AuditEntry.select(AuditEntry.action).order_by(AuditEntry.seq)][
        before:
    ]
    assert order == (["test.meanwhile", "test.slow"] if db.is_postgres() else ["test.slow", "test.meanwhile"])


@pytest.mark.postgres
@pytest.mark.parametrize("lock", ["the chain's", "control: another"])
async def test_an_append_waits_its_turn_behind_another_processs_append(
    demo_db: str, monkeypatch: pytest.MonkeyPatch, lock: str
) -> None:
    """Appends of several API processes take turns on the chain's lock (its row of `api_lock`), held by an
    append until its commit, instead of taking the same seq and retrying. Another process (a connection of
    its own) holds the lock: an entry recorded alone, and one recorded in a transaction, each wait for it,
    then chain after it with one read of the tail. Control: with the app's side locking another row the same
    appends go straight through, so the test would notice the lock taken away."""
    if lock != "the chain's":
        monkeypatch.setattr(audit, "CHAIN_LOCK", "schema")
    before = await AuditEntry.count()
    reads: list[int] = []
    real_tails = audit._tails

    async def counting_tails(company_ids: list[int | None]):
        reads.append(1)
        return await real_tails(company_ids)

    monkeypatch.setattr(audit, "_tails", counting_tails)

    async def in_transaction() -> None:
        async with audit.atomic():
            await audit.record("test.in_transaction", actor="system", company_id=2)

    other = await asyncpg.connect(demo_db)
    try:
        for append in (audit.record("test.alone", actor="system", company_id=1), in_transaction()):
            holding = other.transaction()
            await holding.start()
            # the row itself, not `audit.CHAIN_LOCK`, which the control changes on the app's side only
            await other.execute("SELECT name FROM api_lock WHERE name = 'chain' FOR UPDATE")
            task = asyncio.ensure_future(append)
            done, _ = await asyncio.wait([task], timeout=1 if lock == "the chain's" else 10)
            if lock == "the chain's":
                assert not done  # waiting its turn
            else:
                assert task in done
            await holding.commit()
            await task
    finally:
        await other.close()
    await _assert_chain_holds(2, before)
    assert len(reads) == 2  # each chained after one read of the tail: no seq taken twice, no retry


@pytest.mark.postgres
@pytest.mark.parametrize(
    "path", ["recorded alone", "recorded in atomic()", "control: the caller's own transaction"]
)
async def test_an_append_under_the_chains_lock_sends_no_savepoint(
    demo_db: str, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Holding the chain's lock, no other append reads the tail, so the insert is tried once and needs no
    savepoint: two statements fewer under the one lock every audited write of every process waits on
    (docs/scale.md, item 14). Control: an entry inside a caller's own transaction takes no chain lock and
    keeps its savepoint, which the count sees (so it would see one added back on the other paths)."""
    from piccolo.engine.postgres import PostgresTransaction

    savepoints: list[str] = []
    real = PostgresTransaction.savepoint

    async def counting(self: PostgresTransaction, name: str | None = None):
        point = await real(self, name)
        savepoints.append(point.name)
        return point

    monkeypatch.setattr(PostgresTransaction, "savepoint", counting)
    before = await AuditEntry.count()
    if path == "recorded alone":
        await _record_at_once(3, "alone")
    elif path == "recorded in atomic()":
        async with audit.atomic():
            await audit.record("test.atomic", actor="system", company_id=1)
            await audit.record("test.atomic", actor="system", company_id=2)
    else:
        async with AuditEntry._meta.db.transaction():
            await audit.record("test.own", actor="system", company_id=1)
    expected = {"recorded alone": 3, "recorded in atomic()": 2}.get(path, 1)
    await _assert_chain_holds(expected, before)
    assert len(savepoints) == (1 if path.startswith("control") else 0), savepoints
