"""A run ended after its approval (it finished, or a gate cancelled it before it started): whatever must
follow hears it. Flows hook in here (`backend.flows.progress.wire`, called at start-up by the API and by
every worker: it starts the next step or skips the rest); runs know nothing of flows."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("cleanroom.notify")
Hook = Callable[[int, str], Awaitable[None]]
_hooks: list[Hook] = []


def on_end(hook: Hook) -> Hook:
    """Call `hook(run_id, status)` whenever a run ends; a hook added twice is called once."""
    if hook not in _hooks:
        _hooks.append(hook)
    return hook


async def announce(
    run_id: int, status: str, known: tuple[dict[str, Any], dict[str, Any] | None] | None = None
) -> None:
    """`known`: the run's row and its company's, when the caller read them (a result's path): telling its
    requester then reads nothing when nothing is sent."""
    for hook in list(_hooks):
        await hook(run_id, status)
    try:  # its requester is told (backend/runs/notices.py); never a reason for the end to fail
        from backend.runs import notices

        await notices.ended(run_id, status, known)
    except Exception:
        log.exception("run %s: its end was not told", run_id)
