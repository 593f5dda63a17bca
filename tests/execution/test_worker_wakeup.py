"""An approval starts its run at once: the in-process worker is woken, not left to its next poll.

The worker here polls once an hour, so only the wake-up can start a run within the test's few seconds; the
run itself is not executed (a recording stand-in for `execute`: what is under test is when the worker picks
the run up, not the VM). The control shows that without the announcement the same worker does not pick it up.
"""

from __future__ import annotations

import asyncio

import pytest

from backend.execution import loop
from backend.runs import queued
from tests.support.http import approve_as
from tests.support.runs import proposal


async def _started_within(worker: loop.RunLoop, picked: list[int], run_id: int, seconds: float) -> bool:
    for _ in range(int(seconds / 0.05)):
        if run_id in picked:
            return True
        await asyncio.sleep(0.05)
    return run_id in picked


@pytest.fixture
async def hour_poll_worker(monkeypatch: pytest.MonkeyPatch):
    picked: list[int] = []

    async def record(run_id: int) -> str:
        picked.append(run_id)
        return "succeeded"

    monkeypatch.setattr(loop, "execute", record)
    worker = loop.RunLoop(poll_seconds=3600)
    await worker.start()
    await asyncio.sleep(0.2)  # its first look at the (empty) queue is over; now it waits an hour
    try:
        yield worker, picked
    finally:
        await worker.stop()


@pytest.mark.sqlite  # the in-process worker's wake-up (an asyncio event), not an engine's
async def test_an_approved_run_is_picked_up_at_once(client, alice, acme_on, hour_poll_worker) -> None:
    worker, picked = hour_poll_worker
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    assert await _started_within(worker, picked, run["id"], 5.0)


@pytest.mark.sqlite  # the control of the test above, on the same engine
async def test_control_without_the_announcement_the_run_waits_for_the_poll(
    client, alice, acme_on, hour_poll_worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, picked = hour_poll_worker
    monkeypatch.setattr(queued, "announce", lambda: None)
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    assert not await _started_within(worker, picked, run["id"], 1.5)
