"""What the schedules endpoints accept and return."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from backend.schedules.status import ScheduleStatus


class ScheduleBody(BaseModel):
    """A succeeded run or a succeeded flow to fire on a cron: exactly one of `run_id` and `flow_id`."""

    run_id: int | None = None
    flow_id: int | None = None
    cron: str = Field(min_length=9, max_length=100)
    timezone: str = "UTC"


class ScheduleInfo(BaseModel):
    id: int
    run_id: int  # the succeeded run whose frozen code each firing runs on fresh data (a flow's: its step 1)
    flow_id: int | None = None  # the succeeded flow each firing runs again (every step `read`)
    title: str
    cron: str
    timezone: str
    status: ScheduleStatus
    paused_reason: str | None
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    last_run_id: int | None
    owner_email: str
