"""Sign-in limits that hold under a parallel burst, and password checks that cannot stall the API.

What is counted is what the one guessing controls: failures of one e-mail from one address (the pair), and
failures from one address across e-mails. The address is the browser's as the console forwards it, signed
(`forwarded.py`), else the caller's own. Never the e-mail alone, and never the console's address: a flood of
wrong passwords, for made-up e-mails or for maria's, slows the address it comes from and nobody else; maria
signs in from her own address meanwhile. Past a limit the wait grows, it is no wall: the pair may fail
`login_attempts_per_window` times in the last `login_attempts_keep_windows` windows, then each further try
waits `login_window_seconds` after the latest failure, doubled for each failure beyond those (the same for
an address past `login_attempts_per_ip`). An attempt turned away is not counted: a flood does not lengthen
the wait, and the one flooding still gets a guess only now and then.

An argon2 check costs 64 MiB and tens of milliseconds of a core. Run on the event loop, a few dozen
sign-ins a second would stall every request, the embedded worker and the schedules; so checks run in
threads, at most `login_hash_concurrency` at once, with a bounded queue behind them.

The limits are counted after the attempt is written (as a failure until the password proves right):
every attempt that passes has its row committed before it counts, so the k-th to pass sees at least k-1
others, and a burst of any size gets at most `login_attempts_per_window` checks per pair, whatever number
of API processes share the database. Within one process the write-and-count is also serialised, so a burst
is not refused wholesale: the first ones in are checked. Refused attempts remove their own row: they were
never checked, and a flood must not grow the table.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from backend import clock
from backend.errors import TooManyRequests
from backend.settings import Settings, get_settings
from backend.tenancy.tables import LoginAttempt

_last_prune = 0.0


@dataclass
class _LoopState:
    """Per event loop (tests run a loop per test; asyncio primitives are bound to their loop)."""

    gate: asyncio.Semaphore  # password checks at once
    admit: asyncio.Lock = field(default_factory=asyncio.Lock)  # write-and-count, one at a time
    in_flight: int = 0  # checks running or waiting for the gate


_state: dict[int, _LoopState] = {}  # one entry: the current loop and gate size


def _failures_since(since: datetime):
    return (LoginAttempt.at >= since) & (LoginAttempt.succeeded == False)  # noqa: E712


async def admit(email: str, ip: str) -> int:
    """Writes this attempt as a failure, then counts: refuses (429) while the (e-mail, address) pair or the
    address is waiting out its backoff. Returns the attempt's id, to be marked as succeeded when the
    password is right."""
    settings = get_settings()
    await _prune(settings)
    ip = ip[:64]
    async with _loop_state(settings).admit:
        attempt = LoginAttempt(email=email, ip=ip, at=clock.now(), succeeded=False)
        await attempt.save()
        pair = (LoginAttempt.email == email) & (LoginAttempt.ip == ip)
        wait = max(
            await _wait(settings, pair, attempt.id, settings.login_attempts_per_window),
            await _wait(settings, LoginAttempt.ip == ip, attempt.id, settings.login_attempts_per_ip),
        )
        if wait <= 0:
            return attempt.id
        await forget(attempt.id)
    raise TooManyRequests(f"too many failed sign-in attempts; wait {math.ceil(wait)} seconds and try again")


async def _wait(settings: Settings, who, attempt_id: int, allowed: int) -> float:
    """Seconds `who` must still wait: none while it has fewer than `allowed` failures in the kept history;
    then a window after its latest failure, doubled for each failure beyond `allowed` (other attempts only:
    this one is not counted against itself)."""
    now = clock.now()
    others = who & _failures_since(now - _history(settings)) & (LoginAttempt.id != attempt_id)
    failures = await LoginAttempt.count().where(others)
    if failures < allowed:
        return 0.0
    latest = (
        await LoginAttempt.select(LoginAttempt.at)
        .where(others)
        .order_by(LoginAttempt.at, ascending=False)
        .first()
    )
    window = timedelta(seconds=settings.login_window_seconds)
    backoff = min(window * 2 ** (failures - allowed), _history(settings))
    return (latest["at"] + backoff - now).total_seconds() if latest else 0.0


def _history(settings: Settings) -> timedelta:
    """How far back failures count towards the backoff (older attempts are pruned)."""
    return timedelta(seconds=settings.login_window_seconds * max(1, settings.login_attempts_keep_windows))


async def forget(attempt_id: int) -> None:
    """An attempt whose password was never checked does not count against anyone."""
    await LoginAttempt.delete().where(LoginAttempt.id == attempt_id)


async def succeeded(attempt_id: int) -> None:
    await LoginAttempt.update({LoginAttempt.succeeded: True}).where(LoginAttempt.id == attempt_id)


async def check_password(hasher: PasswordHasher, stored_hash: str, password: str) -> bool:
    """argon2 in a worker thread, at most `login_hash_concurrency` at once; 429 when the queue is full."""
    settings = get_settings()
    state = _loop_state(settings)
    if state.in_flight >= settings.login_hash_concurrency + settings.login_hash_queue:
        raise TooManyRequests("the server is busy checking other sign-ins; try again in a moment")
    state.in_flight += 1
    try:
        async with state.gate:
            return await asyncio.to_thread(_verify, hasher, stored_hash, password)
    finally:
        state.in_flight -= 1


def _verify(hasher: PasswordHasher, stored_hash: str, password: str) -> bool:
    try:
        return hasher.verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _loop_state(settings: Settings) -> _LoopState:
    key = hash((id(asyncio.get_running_loop()), settings.login_hash_concurrency))
    if key not in _state:
        _state.clear()
        _state[key] = _LoopState(asyncio.Semaphore(max(1, settings.login_hash_concurrency)))
    return _state[key]


async def _prune(settings: Settings) -> None:
    """At most once a window: drop attempts older than `login_attempts_keep_windows` windows."""
    global _last_prune
    if time.monotonic() - _last_prune < settings.login_window_seconds:
        return
    _last_prune = time.monotonic()
    await LoginAttempt.delete().where(LoginAttempt.at < clock.now() - _history(settings))
