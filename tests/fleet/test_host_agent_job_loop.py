"""The host agent's job loop (`HostAgent._take_jobs`) when procrastinate's worker ends without being asked.

A lost database connection ends procrastinate's worker in one of two ways: it raises (a query on a cut
connection), or it stops without raising when a side task fails (its heartbeat's query: `Worker.
_monitor_side_tasks` calls `stop()`), and `run_worker_async` returns. Either way the loop must start the worker
again; only the host's own stop ends it. The worker here is a stand-in for procrastinate's, so both paths are
taken every time. The real one, with its connections cut, is in tests/fleet/test_dispatch_recovery.py, where
which path procrastinate takes, if any, is up to timing."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import psycopg
import pytest

from backend.fleet.host_agent import HostAgent


class _App:
    """What `_take_jobs` uses of a procrastinate App: `open_async()` and `run_worker_async(**options)`. Its
    workers end as `endings` say, one each, in turn: "returns" (stopped by itself), "raises" (a lost
    connection at once), or a number (a lost connection after running that many seconds); the next one runs
    until it is cancelled (the host's stop)."""

    def __init__(self, *endings: str | float) -> None:
        self.endings = endings
        self.started = 0
        self.running = asyncio.Event()

    @contextlib.asynccontextmanager
    async def open_async(self):
        yield self

    async def run_worker_async(self, **options) -> None:
        self.started += 1
        if self.started <= len(self.endings):
            ending = self.endings[self.started - 1]
            if ending == "returns":
                return
            if ending != "raises":
                await asyncio.sleep(float(ending))
            raise psycopg.OperationalError("terminating connection due to administrator command")
        self.running.set()
        await asyncio.Event().wait()  # until cancelled


@pytest.mark.parametrize(("first_raises", "logged"), [(False, "stopped by itself"), (True, "administrator")])
async def test_a_worker_that_ended_without_being_asked_is_started_again(caplog, first_raises, logged) -> None:
    agent = HostAgent(host_id="alpha", api_url="http://127.0.0.1:9", token="t", capacity=1)
    app = _App("raises" if first_raises else "returns")
    caplog.set_level(logging.WARNING, logger="cleanroom.fleet.host")
    taking = asyncio.create_task(agent._take_jobs(app))
    try:
        await asyncio.wait_for(app.running.wait(), 10)  # the loop started a second worker
        assert app.started == 2 and not taking.done()
        assert "job queue unreachable" in caplog.text and logged in caplog.text
    finally:
        agent._drain()
        await asyncio.wait_for(taking, 10)  # control: the host's own stop does end the loop
        await agent.api.aclose()
    assert app.started == 2


async def _waits(monkeypatch: pytest.MonkeyPatch, worked_well: float) -> list[float]:
    """The waits the loop chose before each new worker (none actually waited)."""
    from backend.fleet import host_agent

    monkeypatch.setattr(host_agent, "WORKED_WELL_SECONDS", worked_well)
    agent = HostAgent(host_id="alpha", api_url="http://127.0.0.1:9", token="t", capacity=1)
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(agent, "_wait_to_retry", record)
    app = _App("raises", "raises", "raises", 0.3, "raises")  # the fourth ran a while before it failed
    taking = asyncio.create_task(agent._take_jobs(app))
    try:
        await asyncio.wait_for(app.running.wait(), 10)
    finally:
        agent._drain()
        await asyncio.wait_for(taking, 10)
        await agent.api.aclose()
    return waits


async def test_the_backoff_starts_again_after_a_worker_that_ran_well(monkeypatch) -> None:
    """Waits double while the queue stays unreachable; a worker that ran for `WORKED_WELL_SECONDS` before
    it failed is a first failure again (before 2026-12-05 a host that had lost its connection a few times
    over a long life waited up to 30 s at every later loss)."""
    assert await _waits(monkeypatch, worked_well=0.2) == [1.0, 2.0, 4.0, 1.0, 2.0]


async def test_control_without_the_reset_the_waits_keep_doubling(monkeypatch) -> None:
    """Control: with the worker's run shorter than the bar, the same history doubles on, as before."""
    assert await _waits(monkeypatch, worked_well=60.0) == [1.0, 2.0, 4.0, 8.0, 16.0]
