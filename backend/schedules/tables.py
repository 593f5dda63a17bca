from __future__ import annotations

from piccolo.columns import ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.runs.tables import Run
from backend.schedules.status import ScheduleStatus
from backend.tenancy.tables import Company, User

__all__ = ["Schedule", "ScheduleStatus"]


class Schedule(Table):
    company = ForeignKey(references=Company, null=False, index=True)
    owner = ForeignKey(references=User, null=False)
    origin_run = ForeignKey(references=Run, null=False)  # a flow's schedule: its first step's run
    origin_flow = Integer(
        null=True, default=None
    )  # the succeeded flow each firing runs again, every step read
    cron = Varchar(length=100)
    timezone = Varchar(length=64, default="UTC")
    status = Varchar(length=10, default="active")  # a ScheduleStatus
    paused_reason = Text(null=True, default=None)
    next_fire_at = Timestamptz(null=True, default=None)
    last_fired_at = Timestamptz(null=True, default=None)
    last_run_id = Integer(null=True, default=None)
    created_at = Timestamptz()


TABLES = [Schedule]
