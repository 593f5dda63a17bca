"""Run figures over time, for the console's charts: runs per day by status and the median VM start and
duration per day (the runs page), and the company's queue depth over the last day (the health page).

Each reads only the runs the caller may see: the run list's rule (`read.visible_to`: the company's runs for an
admin or auditor, one's own for a member) for the runs page, and the company's own queue for health (what
/api/system/health already tells any signed-in person of the company: its queue length).

The queue depth is computed from the runs' own timestamps, not sampled: a run is in the queue from its
approval (`approved_at`: a person's, a follow-up grant's or a schedule's) until it left it (`started_at`, or
`finished_at` when it ended without starting). No sampler process, no table and no retention to run, exact at
every moment, and the same answer from every API process; the cost is one indexed read of the runs approved
or still waiting within the window. A flow's later step counts from its flow's approval, while it waits for the
steps before it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from statistics import median
from typing import Any

from backend import clock
from backend.runs.read import visible_to
from backend.runs.schemas import QueueHistory, QueuePoint, RunsOnDay, RunStats, TimingsOnDay
from backend.runs.tables import FINISHED, Run
from backend.tenancy.context import UserContext


def aware(moment: datetime | str) -> datetime:
    """A timestamp as read (SQLite may hand an aggregate's back as text), in UTC."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def vm_start_seconds(timings: Any) -> float | None:
    """`timings_ms.start` of a stored SandboxResult: measured by the host from the VM's launch (cold boot or
    restore) to the guest's READY, right before the user code starts. None when the run has none."""
    value = timings.get("start") if isinstance(timings, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return value / 1000


def _day(moment: datetime) -> str:
    return aware(moment).astimezone(UTC).date().isoformat()


async def run_stats(ctx: UserContext, days: int = 30, now: datetime | None = None) -> RunStats:
    now = now or clock.now()
    since = (aware(now) - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    proposed = await Run.select(Run.status, Run.created_at).where(*visible_to(ctx), Run.created_at >= since)
    per_day: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in proposed:
        per_day[_day(row["created_at"])][row["status"]] += 1

    finished = (
        await Run.select(
            Run.started_at, Run.finished_at, Run.result.arrow("timings_ms").as_alias("timings_ms")
        )
        .where(*visible_to(ctx), Run.status.is_in(list(FINISHED)), Run.finished_at >= since)
        .output(load_json=True)
    )
    starts: dict[str, list[float]] = defaultdict(list)
    durations: dict[str, list[float]] = defaultdict(list)
    counted: dict[str, int] = defaultdict(int)
    for row in finished:
        day = _day(row["finished_at"])
        counted[day] += 1
        if (seconds := vm_start_seconds(row["timings_ms"])) is not None:
            starts[day].append(seconds)
        if row["started_at"]:
            durations[day].append(
                max(0.0, (aware(row["finished_at"]) - aware(row["started_at"])).total_seconds())
            )
    return RunStats(
        days=days,
        runs_per_day=[RunsOnDay(day=day, by_status=dict(per_day[day])) for day in sorted(per_day)],
        timings_per_day=[
            TimingsOnDay(
                day=day,
                runs=counted[day],
                vm_start_p50_seconds=round(median(starts[day]), 3) if starts[day] else None,
                duration_p50_seconds=round(median(durations[day]), 3) if durations[day] else None,
            )
            for day in sorted(counted)
        ],
    )


async def queue_history(
    company_id: int, hours: int = 24, step_minutes: int = 15, now: datetime | None = None
) -> QueueHistory:
    """The company's queue depth at every step over the last `hours`, and now (the last point)."""
    now = aware(now or clock.now())
    since = now - timedelta(hours=hours)
    rows = await Run.select(Run.approved_at, Run.started_at, Run.finished_at).where(
        (Run.company == company_id)
        & Run.approved_at.is_not_null()
        & (Run.approved_at <= now)
        & (Run.started_at.is_null() | (Run.started_at >= since))
        & (Run.finished_at.is_null() | (Run.finished_at >= since))
    )
    entered, left = [], []
    for row in rows:
        entered.append(aware(row["approved_at"]))
        gone = row["started_at"] or row["finished_at"]
        left.append(aware(gone) if gone else None)
    entered.sort()
    out = sorted(moment for moment in left if moment is not None)
    step = timedelta(minutes=step_minutes)
    moments = [since + step * n for n in range(int((now - since) / step))] + [now]
    # at a moment: those that entered at or before it, less those that had left at or before it
    points = [QueuePoint(at=at, depth=bisect_right(entered, at) - bisect_right(out, at)) for at in moments]
    return QueueHistory(hours=hours, step_minutes=step_minutes, points=points)
