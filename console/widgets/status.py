"""Run, item and schedule statuses as badges: one colour per status, and the sets the pages poll through."""

from __future__ import annotations

from nicegui import ui

from backend.actions.status import ItemStatus
from backend.runs.status import RunStatus
from backend.schedules.status import ScheduleStatus

STATUS_COLORS: dict[str, str] = {
    RunStatus.awaiting_approval: "orange",
    RunStatus.queued: "blue-grey",
    RunStatus.running: "blue",
    RunStatus.succeeded: "positive",
    RunStatus.failed: "negative",
    RunStatus.timed_out: "negative",
    RunStatus.out_of_memory: "negative",
    RunStatus.error: "negative",
    RunStatus.cancelled: "grey",
    RunStatus.rejected: "grey",
    ItemStatus.pending: "orange",
    ItemStatus.accepted: "positive",
    ItemStatus.invalid: "negative",
    ItemStatus.conflict: "negative",
    ScheduleStatus.active: "positive",
    ScheduleStatus.paused: "grey",
    RunStatus.waiting: "blue-grey-4",  # a flow's step, approved, behind the steps before it
    RunStatus.skipped: "grey",  # a flow's step that never ran: an earlier step did not succeed
}
RUN_STATUSES = [
    RunStatus.awaiting_approval,
    RunStatus.waiting,
    RunStatus.queued,
    RunStatus.running,
    RunStatus.succeeded,
    RunStatus.failed,
    RunStatus.timed_out,
    RunStatus.out_of_memory,
    RunStatus.error,
    RunStatus.cancelled,
    RunStatus.rejected,
    RunStatus.skipped,
]
# statuses a page keeps polling through: a flow's waiting step becomes queued by itself
ACTIVE_STATUSES = {RunStatus.waiting, RunStatus.queued, RunStatus.running}
# statuses with no output files to list yet, or ever (a skipped step never ran)
NO_OUTPUTS = {
    RunStatus.awaiting_approval,
    RunStatus.waiting,
    RunStatus.queued,
    RunStatus.running,
    RunStatus.rejected,
    RunStatus.skipped,
}


def status_badge(status: str) -> ui.badge:
    return ui.badge(status.replace("_", " "), color=STATUS_COLORS.get(status, "grey")).classes("text-sm")
