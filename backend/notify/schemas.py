"""What the notification endpoints accept and return (backend/notify)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from backend.notify.events import EVENT_NAMES

# an event's name, as the document states it (the body's validation refuses any other, 422)
EventName = Literal[EVENT_NAMES]  # type: ignore[valid-type]  # the names are data (events.py), one list


class EventInfo(BaseModel):
    name: str
    label: str


class Preferences(BaseModel):
    """A person's own choices: mail on or off, and the events they are not told of (`muted`). `events`
    lists every event, for a page to draw; `mail_configured` says whether this installation sends mail."""

    email_enabled: bool
    muted: list[str]
    events: list[EventInfo]
    mail_configured: bool


class PreferencesBody(BaseModel):
    email_enabled: bool | None = None
    muted: list[EventName] | None = Field(default=None, max_length=50)


class WebhookInfo(BaseModel):
    """An endpoint as an admin sees it: never its secret (shown once, when it is made)."""

    id: int
    url: str
    events: list[str]
    active: bool
    created_by: str
    created_at: datetime
    delivered: int
    failing: int


class NewWebhook(WebhookInfo):
    secret: str  # shown this once


class WebhookBody(BaseModel):
    url: str = Field(min_length=1, max_length=2000)
    events: list[EventName] = Field(default_factory=list, max_length=50)  # empty: every event
