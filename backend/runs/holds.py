"""No overdraft: approving a run reserves its maximum cost (its limits priced at their whole wall time)
against what is left of the company's pool, in the transaction that approves it.

A run holds its reservation (`Run.credits_reserved`) while it is queued, running or waiting (a flow's
later step) and not yet charged. Nothing releases it by hand: charging it (the real cost, never above the
reservation) and every way it ends without a VM - cancelled, refused, skipped, lost before it started -
move it out of those states, so a reservation cannot be left behind.
"""

from __future__ import annotations

from typing import Any

from piccolo.query.functions.aggregate import Sum

from backend.credits import service as credits
from backend.runs.tables import Run, RunStatus

HOLDING = (RunStatus.queued, RunStatus.running, RunStatus.waiting)


@credits.holder
async def held(company_id: int, user_id: int | None = None) -> float:
    """What the company's (or one person's) approved, unfinished runs hold."""
    where = (
        (Run.company == company_id)
        & Run.status.is_in(list(HOLDING))
        & Run.credits_charged.is_null()
        & (Run.credits_reserved > 0)
    )
    if user_id is not None:
        where &= Run.requested_by == user_id
    # summed by the database: a read of the balance costs one row however many runs are in flight
    row = await Run.select(Sum(Run.credits_reserved)).where(where).first()
    return round((row or {}).get("sum") or 0.0, 2)


def max_cost(limits: dict[str, Any]) -> float:
    return credits.max_cost(limits)


async def reserve(company_id: int, steps: list[dict[str, Any]], *, what: str = "this run") -> list[float]:
    """Reserve the maximum cost of every run in `steps` (their limits) at once, or PaymentRequired. Call it
    inside the `audit.atomic()` that then writes each run's `credits_reserved` (the costs returned)."""
    costs = [max_cost(step["limits"]) for step in steps]
    asker = steps[0].get("requested_by") if steps else None  # held to the admin's per-person limit too
    await credits.reserve(company_id, round(sum(costs), 2), what=what, user_id=asker)
    return costs
