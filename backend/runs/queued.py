"""A run became queued, or a slot to run one came free: whatever starts runs in this process hears it at once,
not at its next poll.

The run loop and the fleet's dispatcher listen (`backend/execution/loop.py`, `backend/fleet/queue.py`);
approvals, follow-ups and schedule firings announce (`backend/runs/approval.py`), and so does the fleet's worker
API when a host's run ends or a host registers or leaves. Without a listener (the loop in a process of its own,
the CLI) announcing does nothing and the loop's poll still finds the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("cleanroom.runs")
_listeners: list[Callable[[], None]] = []


def listen(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` (it must be cheap and thread-safe) whenever a run is queued; returns the way to stop."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback) if callback in _listeners else None


def announce() -> None:
    """Tell every listener; a listener that fails (its event loop is gone) is dropped, never the caller's
    problem: the run is queued either way and a worker's poll finds it."""
    for callback in list(_listeners):
        try:
            callback()
        except Exception:
            log.warning("a queued-run listener failed and was dropped", exc_info=True)
            if callback in _listeners:
                _listeners.remove(callback)
