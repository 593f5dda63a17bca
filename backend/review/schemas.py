"""What the review endpoints return."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

Stage = Literal["proposed", "scanned", "approved", "rejected", "vm", "outputs", "items", "other"]


class TimelineStep(BaseModel):
    stage: Stage
    at: datetime
    actor: str
    action: str  # the audit entry's action (a "scanned" or "outputs" step names the entry it was read from)
    summary: str
    seq: int  # the entry's place in the company's chain (company_seq): find it in an export, check it there
    hash: str


class RunTimeline(BaseModel):
    run_id: int
    title: str
    status: str
    flow_id: int | None
    steps: list[TimelineStep]  # oldest first


class ApprovedDespiteWarning(BaseModel):
    run_id: int
    title: str
    status: str
    requested_by: str
    approved_by: str
    approval_kind: str  # person, followup, schedule
    approved_at: datetime
    worst: Literal["high", "medium"]
    high: int
    medium: int
    warnings: int  # all of them, low included
    approval_seq: int | None  # the audit entry of the approval (none for a flow's step: see the flow's)


class UnreviewedFollowup(BaseModel):
    run_id: int
    title: str
    status: str
    requested_by: str
    narrowed_from: int  # the run a person approved, whose grant let this one through
    approved_at: datetime
    datasets: list[str]
    files: list[str]  # the Drive files it read, by name
    rows: int  # rows staged over all its datasets


class AcceptedPerPerson(BaseModel):
    person: str
    accepted: int
    run_ids: list[int]  # the runs whose items they accepted, newest first


class RejectionRate(BaseModel):
    person: str
    approved: int
    rejected: int
    rate: float  # rejected / (approved + rejected)
    rejected_run_ids: list[int]  # newest first


class FindingsOnDay(BaseModel):
    day: str  # YYYY-MM-DD (UTC), the day the runs were proposed
    runs: int  # runs proposed that day with at least one finding
    by_category: dict[str, int]  # findings shown on their approval screens, by category


class ScheduleReads(BaseModel):
    schedule_id: int
    owner: str
    cron: str
    timezone: str
    status: str  # active, paused
    run_id: int  # the approved run it fires again (a flow's: its first step)
    flow_id: int | None
    datasets: list[str]  # every dataset a firing reads (a flow's: all its steps')
    files: list[str]  # the Drive files a firing reads, by name
    fired: int  # runs it started so far
    last_run_id: int | None
