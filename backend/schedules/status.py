"""A schedule's status (no Piccolo: clients import it; `backend/schedules/tables.py` re-exports it)."""

from __future__ import annotations

from enum import StrEnum


class ScheduleStatus(StrEnum):
    active = "active"
    paused = "paused"  # by a person, or by a firing whose checks failed (paused_reason says which)
