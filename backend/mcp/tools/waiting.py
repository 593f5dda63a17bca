"""get_run's and get_flow's wait: poll until what they show ends or moves on, with progress notifications."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple, TypeVar

from mcp.server.mcpserver import Context

from backend.flows.schemas import FlowDetail
from backend.flows.status import FlowStatus
from backend.mcp.tools.common import FINAL, FLOW_FINAL, stopped
from backend.runs.schemas import RunDetail
from backend.runs.status import RunStatus

Shown = TypeVar("Shown", RunDetail, FlowDetail)

POLL_SECONDS = 0.4
LONG_POLL_SECONDS = 25  # the API's most (runs.controller.MAX_WAIT_SECONDS): the token is checked at each ask
# anything final is stage 3; `waiting`: a flow's step, approved with its flow, waiting for the steps before it
STAGES = {RunStatus.awaiting_approval: 0, RunStatus.waiting: 1, RunStatus.queued: 1, RunStatus.running: 2}


class Seen(NamedTuple):
    """One look at what a wait follows: its statuses by label, how far along it is and whether it ended."""

    statuses: dict[str, str]  # {"": status} for a run; {"step 1": …, …, "flow": …} for a flow
    progress: float
    total: float
    message: str
    finished: bool


def _stage(status: str) -> int:
    return STAGES.get(status, 3)


def seen_run(run: RunDetail) -> Seen:
    status = run.status
    return Seen({"": status}, _stage(status), 3, f"run {run.id}: {status}", status in FINAL)


def seen_flow(flow: FlowDetail) -> Seen:
    """A flow's progress counts every step's stage (and the flow's own end), so it only ever grows."""
    steps = flow.steps
    finished = flow.status in FLOW_FINAL
    statuses = {f"step {s.step}": str(s.run.status) for s in steps} | {"flow": str(flow.status)}
    progress = sum(_stage(s.run.status) for s in steps) + (1 if finished else 0)
    return Seen(statuses, progress, 3 * len(steps) + 1, _flow_progress(flow), finished)


def _flow_progress(flow: FlowDetail) -> str:
    """e.g. "flow 4: step 2/3 running"; the step that stopped a failed flow; how a finished one ended."""
    steps, head = flow.steps, f"flow {flow.id}"
    n = len(steps)
    if flow.status == FlowStatus.awaiting_approval:
        return f"{head}: awaiting approval ({n} step{'s' if n != 1 else ''})"
    current = next((s for s in steps if s.run.status not in FINAL), None)
    if flow.status == FlowStatus.running and current is not None:
        return f"{head}: step {current.step}/{n} {current.run.status}"
    stop = stopped(flow)
    if flow.status == FlowStatus.failed and stop is not None:
        return f"{head}: failed at step {stop.step}/{n} ({stop.run.status})"
    return f"{head}: {flow.status}"


# one look at what a wait follows: (wait_seconds, seen_status) for the API's long poll, None for a plain read
Fetch = Callable[[int | None, str | None], Awaitable[Shown]]


async def wait(
    ctx: Context,
    fetch: Fetch[Shown],
    current: Shown,
    seen: Callable[[Shown], Seen],
    seconds: int,
    until: str,
    *,
    long_poll: bool = False,
) -> tuple[Shown, list[str]]:
    """Read it again (`fetch`) until what it shows ends (or changes status), noting each change and sending a
    progress notification whenever it moved on. A client that goes away only cancels this wait: the run or
    flow itself goes on. `long_poll` (a run): the API itself holds each ask until the status moves
    (`GET /api/runs/{id}?wait_seconds=…&seen_status=…`, one shared status query a tick for all waiters)
    instead of this loop reading the whole run every POLL_SECONDS."""
    deadline = time.monotonic() + seconds
    last = seen(current)
    changes: list[str] = []
    await ctx.report_progress(last.progress, last.total, last.message)
    while time.monotonic() < deadline:
        left = max(0.0, deadline - time.monotonic())
        if long_poll:
            ask = max(1, min(LONG_POLL_SECONDS, math.ceil(left)))
            current = await fetch(ask, current.status)
        else:
            await asyncio.sleep(min(POLL_SECONDS, left))
            current = await fetch(None, None)
        now = seen(current)
        moved = [
            (f"{label}: " if label else "") + f"{last.statuses.get(label)} → {status}"
            for label, status in now.statuses.items()
            if last.statuses.get(label) != status
        ]
        if moved:
            changes += moved
            if now.progress > last.progress:  # progress only grows (a step's waiting → queued is no stage)
                await ctx.report_progress(now.progress, now.total, now.message)
            last = now
            if until == "change" or now.finished:
                break
    return current, changes
