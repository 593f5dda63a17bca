"""A run's end and the audit entry that says so land in one transaction (`finish(entry=…)`): a reader
never sees a run ended whose end is not in the trail yet (a fleet test read exactly that once), and a failure
between the two leaves neither. SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest

from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.execution.execute import end_entry, finish
from backend.runs.tables import Run, RunStatus
from tests.support.runs import proposal


async def _queued(client, alice) -> dict:
    run = (await client.post("/api/runs", json=proposal(code="print(1)\n"), headers=alice)).json()
    await Run.update({Run.status: RunStatus.running}).where(Run.id == run["id"])
    return run


async def _finished_entries(run_id: int) -> int:
    return await AuditEntry.count().where(
        (AuditEntry.action == "run.finished") & (AuditEntry.subject_id == str(run_id))
    )


async def test_a_runs_end_and_its_entry_land_together_or_not_at_all(
    client, alice, acme_on, monkeypatch
) -> None:
    run = await _queued(client, alice)
    row = {
        "id": run["id"],
        "company": (await Run.select(Run.company).where(Run.id == run["id"]).first())["company"],
    }
    entry = end_entry("run.finished", audit.run_actor(run["id"]), row, {"status": "succeeded"})
    real = audit._append

    async def failing_append(*args, **kwargs):
        raise RuntimeError("the disk filled while the entry was written")

    monkeypatch.setattr(audit, "_append", failing_append)
    with pytest.raises(RuntimeError):
        await finish(run["id"], RunStatus.succeeded, entry=entry)
    status = (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"]
    assert status == RunStatus.running  # the end rolled back with its entry
    assert await _finished_entries(run["id"]) == 0
    # control: with the trail writable, both land
    monkeypatch.setattr(audit, "_append", real)
    await finish(run["id"], RunStatus.succeeded, entry=entry)
    status = (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"]
    assert status == RunStatus.succeeded and await _finished_entries(run["id"]) == 1
    assert (await audit.verify()).ok  # the rolled-back entry left no gap in the chain


async def test_a_conditional_end_writes_nothing_when_the_run_moved_on(client, alice, acme_on) -> None:
    """`finish(only_if=…)`: the reaper ends a run it believes still held; a result that landed between its
    read and its write must not be overwritten, and no entry may say the run was lost."""
    run = await _queued(client, alice)
    row = {
        "id": run["id"],
        "company": (await Run.select(Run.company).where(Run.id == run["id"]).first())["company"],
    }
    lost = end_entry("run.worker_lost", "worker:reaper", row, {"reason": "test"})
    still_running = Run.status == RunStatus.running
    await finish(run["id"], RunStatus.succeeded)  # the result lands first
    assert await finish(run["id"], RunStatus.error, entry=lost, only_if=still_running) is False
    status = (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"]
    assert status == RunStatus.succeeded
    assert await AuditEntry.count().where(AuditEntry.action == "run.worker_lost") == 0
    # control: a run still running is ended, with its entry
    other = await _queued(client, alice)
    lost["subject_id"] = other["id"]
    assert await finish(other["id"], RunStatus.error, entry=lost, only_if=still_running) is True
    status = (await Run.select(Run.status).where(Run.id == other["id"]).first())["status"]
    assert status == RunStatus.error
    assert await AuditEntry.count().where(AuditEntry.action == "run.worker_lost") == 1
