"""A run's status and who let it start: the words the API, the console, MCP and the fleet share.

No Piccolo here: clients import this without the tables (`backend/runs/tables.py` re-exports it).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's status, stored as its value."""

    awaiting_approval = "awaiting_approval"
    rejected = "rejected"
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    timed_out = "timed_out"
    out_of_memory = "out_of_memory"
    error = "error"
    cancelled = (
        "cancelled"  # a gate was off when it was due to start (code execution, the write ability, credits)
    )
    waiting = "waiting"  # a flow's step, approved with its flow, waiting for the steps before it
    skipped = "skipped"  # a flow's step that never ran because an earlier step did not succeed


class ApprovalKind(StrEnum):
    """Who let a run start: a person, a person's earlier approval (a follow-up grant), or a schedule."""

    person = "person"
    followup = "followup"
    schedule = "schedule"


STATUSES = tuple(RunStatus)
FINISHED = (
    RunStatus.succeeded,
    RunStatus.failed,
    RunStatus.timed_out,
    RunStatus.out_of_memory,
    RunStatus.error,
    RunStatus.cancelled,
    RunStatus.skipped,
)
RETRYABLE = (RunStatus.failed, RunStatus.timed_out, RunStatus.out_of_memory, RunStatus.error)


def sql_list(statuses: tuple[RunStatus, ...]) -> str:
    """`statuses` as the list of an SQL `IN (...)` composed once: the enum's own words, never input."""
    return ", ".join(f"'{status.value}'" for status in statuses)
