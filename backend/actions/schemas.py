"""What the action-item endpoints return."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from backend.actions.status import ItemStatus


class ActionItemInfo(BaseModel):
    """One change a run's actions.json proposed: nothing reaches the records until a person accepts it."""

    id: int
    run_id: int
    flow_id: int | None  # the flow whose step proposed it (None for a run of its own)
    flow_step: int | None  # that step's number, 1-based
    index: int  # position in actions.json
    op: Literal["create", "update"] | None  # None when the entry was unreadable
    dataset: str | None
    record_id: int | None
    changes: dict[str, Any]  # field: proposed value, as the run wrote it
    before: dict[str, Any] | None  # field: value when the run proposed the update
    reason: str
    status: ItemStatus
    problem: str | None
    raw: str | None  # the entry as proposed, for an invalid one
    decided_by: str | None
    decided_at: datetime | None
    created_record_id: int | None
    unreviewed_run: bool  # the run that proposed it ran as a follow-up no person reviewed
    values_withheld: bool = False  # an auditor who may not read the record sees no values (changes, before)
