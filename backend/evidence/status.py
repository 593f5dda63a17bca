"""A re-run for evidence's status (no Piccolo: the console imports it; `backend/evidence/tables.py`
re-exports it)."""

from __future__ import annotations

from enum import StrEnum


class RerunStatus(StrEnum):
    queued = "queued"
    running = "running"
    finished = "finished"  # its VM ran; `comparison` says what matched
    refused = "refused"  # no VM started: the bundle was gone or no longer hashed as approved
    error = "error"  # the service stopped while it ran, or the sandbox failed


IN_FLIGHT = (RerunStatus.queued, RerunStatus.running)
