"""The events a person or a webhook can be told of: their names (a contract: webhook bodies and preferences
carry them), what the preferences page calls them and the subject of their mail. Imports nothing, so the
request schemas can name them (backend/notify/schemas.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    name: str
    label: str  # what the preferences page calls it
    subject: str  # the mail's subject, formatted with the Notice's fields


EVENTS: dict[str, Event] = {
    e.name: e
    for e in (
        Event("run.awaiting_approval", "A run waits for your approval", "Run #{id} waits for your approval"),
        Event(
            "flow.awaiting_approval", "A flow waits for your approval", "Flow #{id} waits for your approval"
        ),
        Event("run.finished", "Your run finished", "Your run #{id} finished"),
        Event("run.failed", "Your run failed", "Your run #{id} ended {status}"),
        Event(
            "changes.awaiting_decision",
            "Proposed changes wait for you",
            "Run #{id} proposed {count} change(s) that wait for you",
        ),
        Event("schedule.failed", "A schedule's firing failed", "Schedule #{id} could not fire and is paused"),
        Event(
            "credits.pool_80",
            "The company's credit pool is 80 % used",
            "{company}'s credit pool is 80 % used",
        ),
        Event(
            "credits.pool_100", "The company's credit pool is used up", "{company}'s credit pool is used up"
        ),
        Event("worker.lost", "A worker host was lost", "A worker host was lost"),
    )
}

EVENT_NAMES: tuple[str, ...] = tuple(EVENTS)
