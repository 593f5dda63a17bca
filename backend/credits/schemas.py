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


class PersonUsage(BaseModel):
    email: str
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
    """This calendar month's use of the company's pool. A member sees only their own people and runs rows."""

    pool: int
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
