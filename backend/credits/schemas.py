"""What the credits endpoint returns."""

from __future__ import annotations

from datetime import date, datetime

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
