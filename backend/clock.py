"""The one clock of the service: now, as an aware UTC datetime (what every Timestamptz column stores)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now() -> datetime:
    return datetime.now(UTC)


# A credential's "last used" is kept to the minute: a request that reads (an assistant polling a run) does not
# also write, so polls never wait on the database's write lock behind a run's filing.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def last_used_is_stale(last_used_at: datetime | None) -> bool:
    """Whether a credential's `last_used_at` should be written now (never used, or older than the resolution)."""
    return last_used_at is None or now() - last_used_at >= LAST_USED_RESOLUTION
