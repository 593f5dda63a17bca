"""A run became queued: whatever starts runs in this process hears it at once, not at its next poll.

The in-process worker listens (`backend/worker/queue.py`); approvals, follow-ups and schedule firings
announce. Without a listener (a separate worker process, the CLI) announcing does nothing and the worker's
poll still finds the run.
"""

from __future__ import annotations

from collections.abc import Callable

_listeners: list[Callable[[], None]] = []


def listen(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` (it must be cheap and thread-safe) whenever a run is queued; returns the way to stop."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback) if callback in _listeners else None


def announce() -> None:
    for callback in list(_listeners):
        callback()
