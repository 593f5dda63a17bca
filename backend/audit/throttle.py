"""Audit entries for repeated refusals, at most one per key per window, with a count.

A token looping on a person-only route is refused every time; writing one entry (and an fsynced anchor
line) per refusal would let it grow the trail without bound and slow every audited action behind the
append lock. So the first refusal of a quiet key is recorded at once (`count: 1`); the ones that follow
within the window are counted in memory and recorded together in one entry when the window ends
(`count: n`, `repeated: true`, the distinct routes tried). A loop that goes on gets one entry a window;
the counts of a key's entries add up to its refusals. Counted per API process: several processes write
at most one entry a window each. `flush()` records what is still counted (the app calls it on shutdown).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from backend.audit import service as audit

WINDOW_SECONDS = 60.0
MAX_ROUTES = 20  # distinct "METHOD path" kept per summary entry


@dataclass
class _Key:
    action: str
    actor: str
    company_id: int | None
    subject_type: str
    subject_id: str
    data: dict[str, Any]  # the latest refusal's own data
    recorded_at: float  # monotonic time of this key's last entry
    pending: int = 0  # refusals since then, not yet recorded
    first_at: datetime | None = None
    last_at: datetime | None = None
    routes: set[str] = field(default_factory=set)
    timer: asyncio.TimerHandle | None = None


@dataclass
class _LoopState:
    keys: dict[Any, _Key] = field(default_factory=dict)
    tasks: set[asyncio.Task] = field(default_factory=set)


# per event loop (tests run one per test): a timer belongs to the loop it was set on
_states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()


def _state() -> _LoopState:
    loop = asyncio.get_running_loop()
    state = _states.get(loop)
    if state is None:
        state = _states[loop] = _LoopState()
    return state


async def record(
    key: Any,
    action: str,
    *,
    actor: str,
    company_id: int | None,
    subject_type: str = "",
    subject_id: Any = "",
    data: dict[str, Any] | None = None,
    route: str = "",
) -> bool:
    """Records this refusal now when `key` has no entry in the last window (True), or counts it towards
    the entry written when the window ends (False)."""
    state = _state()
    now = time.monotonic()
    _forget_quiet(state, now)
    known = state.keys.get(key)
    if known is not None:  # decided before any await: a parallel burst records one entry, not several
        known.pending += 1
        known.data, known.last_at = dict(data or {}), datetime.now(UTC)
        known.first_at = known.first_at or known.last_at
        if len(known.routes) < MAX_ROUTES:
            known.routes.add(route)
        if known.timer is None:
            delay = max(0.0, known.recorded_at + WINDOW_SECONDS - now)
            known.timer = asyncio.get_running_loop().call_later(delay, _window_ended, state, key)
        return False
    state.keys[key] = _Key(action, actor, company_id, subject_type, str(subject_id), dict(data or {}), now)
    await audit.record(
        action,
        actor=actor,
        company_id=company_id,
        subject_type=subject_type,
        subject_id=subject_id,
        data={**(data or {}), "count": 1},
    )
    return True


def _forget_quiet(state: _LoopState, now: float) -> None:
    """Keys with nothing counted and no entry in the last window start afresh."""
    for key in [k for k, v in state.keys.items() if not v.pending and now - v.recorded_at >= WINDOW_SECONDS]:
        del state.keys[key]


def _window_ended(state: _LoopState, key: Any) -> None:
    task = asyncio.get_running_loop().create_task(_record_counted(state, key))
    state.tasks.add(task)
    task.add_done_callback(state.tasks.discard)


async def _record_counted(state: _LoopState, key: Any) -> None:
    known = state.keys.get(key)
    if known is None:
        return
    if known.timer is not None:
        known.timer.cancel()
        known.timer = None
    if not known.pending:
        return
    data = {
        **known.data,
        "count": known.pending,
        "repeated": True,
        "routes": sorted(known.routes),
        "first_at": known.first_at.isoformat(timespec="seconds") if known.first_at else None,
        "last_at": known.last_at.isoformat(timespec="seconds") if known.last_at else None,
    }
    # taken before the await: refusals arriving while this entry is written count towards the next one
    known.pending, known.first_at, known.last_at, known.routes = 0, None, None, set()
    known.recorded_at = time.monotonic()
    await audit.record(
        known.action,
        actor=known.actor,
        company_id=known.company_id,
        subject_type=known.subject_type,
        subject_id=known.subject_id,
        data=data,
    )


async def flush() -> None:
    """Record every count still waiting for its window to end (on shutdown; tests)."""
    state = _state()
    if state.tasks:
        await asyncio.gather(*list(state.tasks), return_exceptions=True)
    for key in list(state.keys):
        await _record_counted(state, key)
