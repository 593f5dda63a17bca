"""No overdraft: approving a run reserves its maximum cost (its limits priced at their whole wall time)
against what is left of the company's pool, in the transaction that approves it.

A run holds its reservation (`Run.credits_reserved`) while it is queued, running or waiting (a flow's
later step) and not yet charged. Nothing releases it by hand: charging it (the real cost, never above the
reservation) and every way it ends without a VM - cancelled, refused, skipped, lost before it started -
move it out of those states, so a reservation cannot be left behind.
"""

from __future__ import annotations

from typing import Any

from backend.credits import service as credits
from backend.runs.status import sql_list
from backend.runs.tables import Run, RunStatus

HOLDING = (RunStatus.queued, RunStatus.running, RunStatus.waiting)


# What approved, unfinished runs hold, summed by the database (one row however many are in flight), in SQL
# composed once: a read of a run awaiting approval shows the balance, and Piccolo built this anew each time
_HELD = (
    'SELECT SUM("credits_reserved") AS "sum" FROM "run" WHERE "company" = {} '
    f'AND "status" IN ({sql_list(HOLDING)}) '
    'AND "credits_charged" IS NULL AND "credits_reserved" > 0'
)
_HELD_BY = _HELD + ' AND "requested_by" = {}'


@credits.holder
async def held(company_id: int, user_id: int | None = None) -> float:
    """What the company's (or one person's) approved, unfinished runs hold."""
    if user_id is None:
        rows = await Run.raw(_HELD, company_id)
    else:
        rows = await Run.raw(_HELD_BY, company_id, user_id)
    return round((rows[0] if rows else {}).get("sum") or 0.0, 2)


def max_cost(limits: dict[str, Any]) -> float:
    return credits.max_cost(limits)


async def reserve(
    company_id: int,
    steps: list[dict[str, Any]],
    *,
    what: str = "this run",
    company: dict[str, Any] | None = None,
) -> list[float]:
    """Reserve the maximum cost of every run in `steps` (their limits) at once, or PaymentRequired. Call it
    inside the `audit.atomic()` that then writes each run's `credits_reserved` (the costs returned).
    `company`: its row as read this request (the admin's limits are on it)."""
    costs = [max_cost(step["limits"]) for step in steps]
    asker = steps[0].get("requested_by") if steps else None  # held to the admin's per-person limit too
    await credits.reserve(company_id, round(sum(costs), 2), what=what, user_id=asker, company=company)
    return costs
