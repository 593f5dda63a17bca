"""The job queue between the API and the workers: procrastinate on the product's PostgreSQL.

The API decides *which* queued run goes next (companies in turn, `backend.worker.queue.queued_ids`) and
hands a run to procrastinate only while a worker slot is free for it, so the queue never holds a long
FIFO one company filled: a company already at its share of the slots waits while another company's runs
wait. Procrastinate delivers each job to one worker (LISTEN/NOTIFY, so pickup is immediate) and keeps it
across restarts of the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

import procrastinate
import psycopg

from backend.fleet import service
from backend.fleet.tables import WorkerHost
from backend.runs import queued
from backend.runs.tables import Run, RunStatus
from backend.schedules import service as schedules
from backend.settings import get_settings
from backend.worker.queue import queued_ids
from backend.worker.retention import sweep_bundles

log = logging.getLogger("cleanroom.fleet")
TASK = "cleanroom.run"
QUEUE = "runs"
SCHEMA_LOCK = 7_311_001  # pg advisory lock: one process applies procrastinate's schema


def database_url() -> str:
    """The database the tables are bound to (the API may be given one), else the settings' one."""
    bound = getattr(Run._meta, "_db", None)  # not `.db`: that would go looking for a piccolo_conf module
    dsn = getattr(bound, "config", {}).get("dsn") if bound is not None else None
    return dsn or get_settings().effective_database_url


def make_app(url: str | None = None, *, name: str = "cleanroom-api") -> procrastinate.App:
    """`name` is the connections' application_name (`cleanroom-worker-<host>` in a worker): an operator
    sees in pg_stat_activity who holds which connection."""
    url = url or database_url()
    if not url.startswith(("postgres://", "postgresql://")):
        raise RuntimeError("workers in a fleet need PostgreSQL (DATABASE_URL=postgresql://…)")
    connector = procrastinate.PsycopgConnector(conninfo=url, kwargs={"application_name": name})
    return procrastinate.App(connector=connector)


async def ensure_schema(app: procrastinate.App, url: str | None = None) -> None:
    """Procrastinate's tables, once per database (under an advisory lock: API and workers may race)."""
    url = url or database_url()
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
        if row and row[0]:
            return
        await conn.execute(app.schema_manager.get_schema())
        log.info("procrastinate schema applied")


async def slots() -> int:
    """Run slots of the workers that are up and not draining."""
    rows = await WorkerHost.select(WorkerHost.capacity).where(
        WorkerHost.lost_at.is_null() & (WorkerHost.draining.eq(False))
    )
    return sum(r["capacity"] for r in rows)


async def dispatch(app: procrastinate.App) -> list[int]:
    """Hand queued runs to the job queue while slots are free: companies in turn, none above its share
    (the slots divided among companies with work) while another company's runs wait, and none above
    `company_concurrency_cap` (0: no cap). Returns the runs handed over."""
    free = await slots()
    in_flight = await Run.select(Run.id, Run.company).where(
        (Run.status == RunStatus.running)
        | ((Run.status == RunStatus.queued) & Run.dispatched_at.is_not_null())
    )
    waiting = await Run.select(Run.id, Run.company).where(
        (Run.status == RunStatus.queued) & Run.dispatched_at.is_null()
    )
    if not waiting:
        return []
    held = Counter(r["company"] for r in in_flight)
    free -= len(in_flight)
    company_of = {r["id"]: r["company"] for r in waiting}
    pending = Counter(company_of.values())
    active = set(held) | set(pending)
    share = math.ceil(max(1, free + len(in_flight)) / max(1, len(active)))
    cap = get_settings().company_concurrency_cap
    handed: list[int] = []
    for run_id in await queued_ids():
        if free <= 0:
            break
        company = company_of.get(run_id)
        if company is None:
            continue  # already handed over
        others_wait = any(pending[c] > 0 for c in active if c != company)
        if (cap and held[company] >= cap) or (others_wait and held[company] >= share):
            continue
        marked = (
            await Run.update({Run.dispatched_at: datetime.now(UTC)})
            .where((Run.id == run_id) & (Run.status == RunStatus.queued) & Run.dispatched_at.is_null())
            .returning(Run.id)
        )
        if not marked:
            continue  # another API process handed it over
        try:
            await app.configure_task(TASK, queue=QUEUE).defer_async(run_id=run_id)
        except Exception:
            await Run.update({Run.dispatched_at: None}).where(Run.id == run_id)
            raise
        held[company] += 1
        pending[company] -= 1
        free -= 1
        handed.append(run_id)
    return handed


class Dispatcher:
    """In the API process of a fleet: dispatch on every approval and every `worker_heartbeat_seconds`,
    reap workers whose heartbeat stopped, fire due schedules and sweep retained bundles."""

    def __init__(self) -> None:
        self.app: procrastinate.App | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._unlisten: Callable[[], None] | None = None
        self._last_schedules = -math.inf

    async def start(self) -> None:
        self.app = make_app()
        await ensure_schema(self.app)
        await self.app.open_async()
        loop = asyncio.get_running_loop()
        self._unlisten = queued.listen(lambda: loop.call_soon_threadsafe(self._wake.set))
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._unlisten:
            self._unlisten()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.app is not None:
            await self.app.close_async()

    async def _loop(self) -> None:
        assert self.app is not None
        loop = asyncio.get_running_loop()
        last_sweep = -math.inf
        while True:
            try:
                await service.reap()
                if (
                    loop.time() - self._last_schedules > 15
                ):  # due schedules queue runs, as the embedded worker
                    self._last_schedules = loop.time()
                    await schedules.fire_due()
                await dispatch(self.app)
                if loop.time() - last_sweep > 60 * get_settings().bundle_sweep_minutes:
                    last_sweep = loop.time()
                    await sweep_bundles()  # bundles past their retention, as the in-process worker does
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dispatching runs to workers failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), get_settings().worker_heartbeat_seconds)
            self._wake.clear()


DISPATCHER = Dispatcher()
