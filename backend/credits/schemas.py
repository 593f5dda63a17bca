"""What the credits endpoint returns."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel


class Rates(BaseModel):
    base: float  # per run, also the least a pool must hold before a run is proposed or approved
    per_vcpu_second: float
    per_gib_second: float


class DayUsage(BaseModel):
    day: date
    credits: float
    by_kind: dict[str, float] = {}  # "run", "chat_turn", ...: what each kind of charge used that day


class PersonUsage(BaseModel):
    email: str
    credits: float
    by_kind: dict[str, float] = {}  # their runs' and their chat turns' charges, apart


class KindUsage(BaseModel):
    kind: str  # "run" (a run's or a flow step's charge), "chat_turn" or another kind the platform named
    label: str  # "runs", "chat turns", ...
    credits: float


class RunCharge(BaseModel):
    id: int
    title: str
    email: str  # who asked for the run
    credits: float


class FlowCharge(BaseModel):
    """A flow's steps charged this month, summed: each step is charged like a run."""

    id: int
    title: str
    email: str  # who asked for the flow
    steps_charged: int
    credits: float


class Forecast(BaseModel):
    """Where this week's rate takes the pool (backend/credits/forecast.py). This week's rate: the credits
    charged in the last `window_days` (7) days, every kind alike, divided by 7. What approved runs not yet
    finished hold counts as spent."""

    status: Literal["used_up", "no_usage", "runs_out", "lasts"]
    summary: str  # the sentence the console shows: "At this week's rate (...) the pool lasts until 24 March 2026 ..."
    as_of: datetime  # the clock's reading it was computed at
    window_days: int
    charged_this_week: float  # in the last `window_days` days, across a period's start too
    charged_this_week_by_kind: dict[str, float] = {}
    rate_per_day: float  # charged_this_week / window_days
    rate_per_day_by_kind: dict[str, float] = {}
    left: float  # the pool less this period's charges and what approved runs hold (`remaining`)
    reserved: float  # of what is committed, what approved runs not yet finished hold
    runs_out_at: datetime | None = None  # only when status is "runs_out": when what is left reaches zero
    runs_out_on: date | None = None  # its day (UTC)
    period_end: (
        datetime  # when the period ends and the pool fills again (the next month's first instant, UTC)
    )


class LimitLeft(BaseModel):
    """A company admin's limit within the pool as it stands for one person."""

    kind: Literal["per_person", "per_day"]  # per person this period, or the company's per day
    limit: int
    taken: float  # what charges and approved runs' holds took of it (the person's; or the company's today)
    left: float  # limit - taken


class ApprovalCost(BaseModel):
    """What approving a run would hold against the pool, said on the approval screen before the decision."""

    max_cost: float  # its limits priced at their whole wall time: what its approval reserves
    pool: int  # this period's pool
    reserved: float  # what approved runs not yet finished hold already
    pool_left: float  # the pool less this period's charges and those holds
    limit: LimitLeft | None = (
        None  # the admin's limit for the person who asked, when it leaves less than the pool
    )
    left: float  # the lesser of pool_left and limit.left: what this approval may take
    covered: bool  # max_cost <= left: approving it now would not be refused 402 for credits


class CreditUsage(BaseModel):
    """This calendar month's use of the company's pool, runs and the assistant platform's charges (chat turns,
    ...) alike. A member sees only their own people and runs rows."""

    pool: int  # the plan's monthly credits and this period's top-ups
    used: float
    reserved: float = 0.0  # the maximum cost of approved runs not yet finished, held until each ends
    remaining: float  # the pool less what was used and what is reserved
    period_start: datetime
    minimum_charge: float
    rates: Rates
    usage_by_day: list[DayUsage]
    usage_by_user: list[PersonUsage]
    costliest_runs: list[RunCharge]  # at most ten, costliest first
    costliest_flows: list[FlowCharge] = []  # at most ten flows (their steps summed), costliest first
    usage_by_kind: list[KindUsage] = []  # runs and chat turns side by side, largest first
    plan: str = ""  # the plan the operator put the company on
    plan_credits: int = 0  # its monthly credits (the pool without this period's top-ups)
    top_ups: int = 0  # what the operator added this period
    limit_per_person: int = 0  # the admin's limits within the pool, 0 for none
    limit_per_day: int = 0
    period_end: datetime | None = None  # when the period ends and the pool fills again
    forecast: Forecast | None = None  # where this week's rate takes the pool
