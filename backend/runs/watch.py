"""Waiting for a run's status to change, for every waiter of this process at the cost of one query a tick.

A waiting assistant (MCP `get_run(wait_seconds)`, or `GET /api/runs/{id}?wait_seconds=…`) used to re-read the
whole run detail through the API every 0.4 s: with a thousand waiting, that is 2,500 detail reads a second,
each with its token check and a dozen queries. Here every waiter of the process registers the status it last
saw; one task reads the status of all the waited runs in one query per tick and wakes exactly those whose
status differs. Only then does the waiter read the run again (through the API, with its permissions). It
reads the database, so it sees changes made by any process (another API process, a fleet's results).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict

from backend.runs.tables import Run

log = logging.getLogger("cleanroom.runs.watch")
TICK_SECONDS = 0.4


class StatusWatch:
    def __init__(self) -> None:
        self._waiters: dict[int, list[tuple[str, asyncio.Future[None]]]] = defaultdict(list)
        self._task: asyncio.Task[None] | None = None
        self.queries = 0  # how many reads it made (tests and the bench read it)

    async def wait(self, run_id: int, seen_status: str) -> None:
        """Until the run's status is no longer `seen_status`; a run deleted meanwhile counts as changed. The
        caller bounds it (`asyncio.timeout`)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (str(seen_status), future)
        self._waiters[run_id].append(entry)
        self._ensure_running()
        try:
            await asyncio.shield(future)
        finally:
            waiting = self._waiters.get(run_id)
            if waiting is not None:
                with contextlib.suppress(ValueError):
                    waiting.remove(entry)
                if not waiting:
                    del self._waiters[run_id]

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="cleanroom-status-watch")

    async def _run(self) -> None:
        while self._waiters:
            await asyncio.sleep(TICK_SECONDS)
            ids = list(self._waiters)
            if not ids:
                break
            try:
                rows = await Run.select(Run.id, Run.status).where(Run.id.is_in(ids))
            except Exception:  # the database away for a moment: the waiters wait on, their timeouts bound it
                log.warning("reading the waited runs' status failed", exc_info=True)
                continue
            self.queries += 1
            now = {row["id"]: row["status"] for row in rows}
            for run_id in ids:
                status = now.get(run_id)
                for seen, future in list(self._waiters.get(run_id, [])):
                    if status != seen and not future.done():
                        future.set_result(None)


_watches: dict[asyncio.AbstractEventLoop, StatusWatch] = {}


def watch() -> StatusWatch:
    """This event loop's watch (the API's requests and the in-process MCP share the API's loop)."""
    loop = asyncio.get_running_loop()
    found = _watches.get(loop)
    if found is None:
        for old in [known for known in _watches if known.is_closed()]:
            del _watches[old]
        found = _watches[loop] = StatusWatch()
    return found
