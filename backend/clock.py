"""The one clock of the service: now, as an aware UTC datetime (what every Timestamptz column stores)."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)
