"""Which queued run starts next, and the run loop that starts them (and fires due schedules): in the API
process (the embedded default) or in a process of its own (`process.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from backend.execution.execute import execute, finish, recover
from backend.execution.rerun import execute_rerun, queued_reruns
from backend.execution.retention import sweep_bundles
from backend.flows import progress as flows
from backend.records import jobs as record_jobs
from backend.records import sync as records_sync
from backend.runs import queued
from backend.runs.tables import Run, RunStatus
from backend.sandbox.standby import service_standby_count, start_standby_pool, stop_standby_pool
from backend.schedules import service as schedules
from backend.settings import get_settings

log = logging.getLogger("cleanroom.loop")


async def queued_ids(limit: int | None = None) -> list[int]:
    """Queued runs in the order to start them: round-robin across companies, each company's oldest first.

    Round one holds the oldest queued run of every company, round two the second oldest, and so on;
    within a round, companies with fewer runs already running go first, then the longest-waiting.
    `limit`: only the order's first `limit` runs are wanted (`queued_runs`).
    """
    return [row["id"] for row in await queued_runs(limit)]


QUEUE_HEAD = """
SELECT "id", "company", "dispatched_at" FROM (
    SELECT "id", "company", "dispatched_at",
           ROW_NUMBER() OVER (PARTITION BY "company" ORDER BY "id") AS "position"
    FROM "run" WHERE "status" = {}
) AS "ranked" WHERE "position" <= {} ORDER BY "id"
"""


async def queued_runs(
    limit: int | None = None, running: dict[int, int] | None = None
) -> list[dict[str, Any]]:
    """The queued runs (`id`, `company`, `dispatched_at`) in `queued_ids`' order. With `limit`, each
    company's `limit` oldest are read, not the whole queue: a company's place in a round is its count of
    older queued runs, so the order's first `limit` runs are among them, in the same order. A long backlog
    then costs a pass its companies, not its length (a fleet's dispatcher passes at every result).
    `running`: the runs running per company, when the caller has just read them (else read here)."""
    if limit is None:
        queued = (
            await Run.select(Run.id, Run.company, Run.dispatched_at)
            .where(Run.status == RunStatus.queued)
            .order_by(Run.id)
        )
    elif limit <= 0:
        return []
    else:
        queued = await Run.raw(QUEUE_HEAD, RunStatus.queued.value, limit)
    if running is None:
        running = {}
        for row in await Run.select(Run.company).where(Run.status == RunStatus.running):
            running[row["company"]] = running.get(row["company"], 0) + 1
    per_company: dict[int, list[dict[str, Any]]] = {}
    for row in queued:
        per_company.setdefault(row["company"], []).append(row)
    turn = sorted(per_company, key=lambda c: (running.get(c, 0), per_company[c][0]["id"]))
    ordered: list[dict[str, Any]] = []
    for position in range(max((len(rows) for rows in per_company.values()), default=0)):
        ordered.extend(per_company[c][position] for c in turn if position < len(per_company[c]))
    return ordered if limit is None else ordered[:limit]


async def drain() -> None:
    """Run everything queued now, up to the VM cap at once (tests and the CLI use this)."""
    flows.wire()
    limit = asyncio.Semaphore(max(1, get_settings().max_concurrent_vms))

    async def one(run_id: int) -> None:
        async with limit:
            await execute(run_id)

    async def rerun(rerun_id: int) -> None:
        async with limit:
            await execute_rerun(rerun_id)

    while (ids := await queued_ids()) or (reruns := await queued_reruns()):
        if ids:
            await asyncio.gather(*(one(i) for i in ids))
        else:
            await asyncio.gather(*(rerun(i) for i in reruns))


class RunLoop:
    """The run loop: polls the queue, and fires due schedules. A run queued in this process
    (`backend.runs.queued`) or a run ending wakes it at once; the poll is the fallback."""

    def __init__(self, poll_seconds: float = 0.5) -> None:
        self.poll_seconds = poll_seconds
        self.active: set[int] = set()
        self.active_reruns: set[int] = set()  # re-runs for evidence (execution/rerun.py)
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._last_schedule_check = 0.0
        self._last_sweep = 0.0
        self._wake: asyncio.Event | None = None
        self._unlisten: Callable[[], None] | None = None

    @property
    def running(self) -> int:
        return len(self.active)

    async def start(self) -> None:
        flows.wire()  # before recovery: a flow left between two steps moves on from there
        await recover()
        await self._sweep()  # bundles whose retention ran out while the service was down
        if standby := service_standby_count():  # after recovery: it removes leftover guests
            start_standby_pool(standby)
            log.info("standby pool: keeping %d restored guests ready", standby)
        loop, wake = asyncio.get_running_loop(), asyncio.Event()
        self._wake = wake
        self._unlisten = queued.listen(lambda: loop.call_soon_threadsafe(wake.set))
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._unlisten:
            self._unlisten()
        if self._task:
            self._task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await record_jobs.stop()  # a running import rolls back: its job ends failed, nothing applied
        await asyncio.to_thread(stop_standby_pool)  # waiting guests are killed, never left behind

    def wake(self) -> None:
        """Look at the queue now (a run was queued in another process: the API's signal)."""
        if self._wake is not None:
            self._wake.set()

    async def drain(self) -> None:
        """Stop taking runs, let the running ones finish (their VMs are not killed), then stop."""
        if self._unlisten:
            self._unlisten()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.stop()

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                if loop.time() - self._last_schedule_check > get_settings().schedule_check_seconds:
                    self._last_schedule_check = loop.time()
                    await schedules.fire_due()
                    records_sync.start_due_syncs()  # datasets synced from a company's database
                record_jobs.start_queued()  # imports and syncs people started (records/jobs.py)
                if loop.time() - self._last_sweep > 60 * get_settings().bundle_sweep_minutes:
                    await self._sweep()
                vms = max(1, get_settings().max_concurrent_vms)
                capacity = vms - len(self.active) - len(self.active_reruns)
                for run_id in await queued_ids(limit=capacity):
                    if run_id in self.active:
                        continue
                    self.active.add(run_id)
                    task = asyncio.create_task(self._run(run_id))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                await self._start_reruns()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("run loop error")
            await self._idle()

    async def _start_reruns(self) -> None:
        """Re-runs for evidence take the VM slots runs leave free (runs are the companies' work)."""
        capacity = max(1, get_settings().max_concurrent_vms) - len(self.active) - len(self.active_reruns)
        if capacity <= 0:
            return
        for rerun_id in (await queued_reruns())[:capacity]:
            if rerun_id in self.active_reruns:
                continue
            self.active_reruns.add(rerun_id)
            task = asyncio.create_task(self._rerun(rerun_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _rerun(self, rerun_id: int) -> None:
        try:
            await execute_rerun(rerun_id)  # ends the re-run itself, whatever happens inside
        finally:
            self.active_reruns.discard(rerun_id)
            if self._wake is not None:
                self._wake.set()

    async def _idle(self) -> None:
        """Until the next poll, or sooner when woken."""
        if self._wake is None:
            await asyncio.sleep(self.poll_seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
        self._wake.clear()

    async def _sweep(self) -> None:
        self._last_sweep = asyncio.get_running_loop().time()
        try:
            await sweep_bundles()
        except Exception:  # a sweep that fails is tried again at the next one; runs go on
            log.exception("sweeping staged bundles failed")

    async def _run(self, run_id: int) -> None:
        try:
            await execute(run_id)
        except Exception:
            log.exception("run %s failed in the run loop", run_id)
            await finish(
                run_id, RunStatus.error, error_message="internal error in the worker; see the server log"
            )
        finally:
            self.active.discard(run_id)
            if self._wake is not None:  # a slot is free: the next queued run need not wait for the poll
                self._wake.set()


RUN_LOOP = RunLoop()


async def start_loop() -> None:
    await RUN_LOOP.start()


async def stop_loop() -> None:
    await RUN_LOOP.stop()
