"""When the standby pool refills: never beside a run or right after one while a guest still waits (the next
run, such as a flow's next step, usually follows at once); at once when none waits."""

from __future__ import annotations

import time

from backend.sandbox import standby
from backend.sandbox.standby import StandbyPool


def _pool(want: int, ready: int, active: int, ended_ago: float) -> StandbyPool:
    pool = StandbyPool()
    pool._want, pool._ready, pool._active_runs = want, [object()] * ready, active  # type: ignore[list-item]
    pool._last_run_end = time.monotonic() - ended_ago
    return pool


def test_a_guest_still_waiting_defers_the_refill_beside_and_right_after_a_run() -> None:
    assert _pool(want=2, ready=1, active=1, ended_ago=100)._busy() == 1.0
    pause = _pool(want=2, ready=1, active=0, ended_ago=0.2)._busy()
    assert pause is not None and 0.5 < pause <= standby.REFILL_SETTLE_SECONDS
    # the control: long after the run, the same pool refills
    assert _pool(want=2, ready=1, active=0, ended_ago=standby.REFILL_SETTLE_SECONDS + 0.5)._busy() is None


def test_with_no_guest_waiting_the_refill_goes_at_once_and_a_full_pool_waits() -> None:
    assert _pool(want=2, ready=0, active=1, ended_ago=0.0)._busy() is None
    assert _pool(want=2, ready=2, active=0, ended_ago=100)._busy() == 1.0
