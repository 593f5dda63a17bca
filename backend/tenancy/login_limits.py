"""Sign-in limits that hold under a parallel burst, that one attacker cannot turn against everyone, and
password checks that cannot stall the API.

What is counted is what the one guessing controls: failures of one e-mail from one address (the pair),
failures from one address across e-mails, and failures of one e-mail (the account) from addresses it never
signed in from. An address is a bucket of what one party holds: an IPv4 address, an IPv6 /64 (a household or
a cloud machine gets a whole /64, so counting single IPv6 addresses would let it guess without end), an
IPv4-mapped IPv6 address as its IPv4 (`address_bucket`). The address is the browser's as the console
forwards it, signed (`forwarded.py`), else the caller's own; never the console's.

Past a limit the wait grows, it is no wall: the pair may fail `login_attempts_per_window` times in the last
`login_attempts_keep_windows` windows, then each further try waits `login_window_seconds` after the latest
failure, doubled for each failure beyond those (the same for an address past `login_attempts_per_ip`, and
for an account past `login_attempts_per_account`). An attempt turned away is not counted: a flood does not
lengthen the wait, and the one flooding still gets a guess only now and then.

The account's limit spreads guessing over many addresses thin, and it never locks the owner out: an
address that signed in to the account before (a "known" pair, remembered per account: the latest
`login_known_addresses_per_account`, for `login_known_address_days`) is exempt from it, and from the
address's limit too, and is held only by its own pair's: neither a flood on the account from elsewhere nor
a flood of other e-mails from a shared address (an office, a proxy FORWARDED_ALLOW_IPS does not name) keeps
the owner out; only someone guessing this very e-mail from this very address slows it down. A person on a new
address while their account is under attack waits with the attacker.

An argon2 check costs 64 MiB and tens of milliseconds of a core. Run on the event loop, a few dozen
sign-ins a second would stall every request, the embedded worker and the schedules; so checks run in
threads, at most `login_hash_concurrency` at once, with bounded queues behind them. Two queues (lanes):
one for known pairs, served first, and one for everyone else, each `login_hash_queue` long. A flood from
fresh addresses, each under its own limits, fills its own lane and gets 429 "busy"; a known pair's check
still waits only for the running ones. One known pair holds at most `KNOWN_LANE_PER_PAIR` places in its
lane (more go to the other), so one person who knows their own password cannot fill it.

The limits are counted after the attempt is written (as a failure until the password proves right):
every attempt that passes has its row committed before it counts, so the k-th to pass sees at least k-1
others, and a burst of any size gets at most `login_attempts_per_window` checks per pair, whatever number
of API processes share the database. Within one process the write-and-count is also serialised, so a burst
is not refused wholesale: the first ones in are checked. Refused attempts remove their own row: they were
never checked, and a flood must not grow the table. A success stays as the pair's one remembered success.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from backend import clock
from backend.errors import TooManyRequests
from backend.settings import Settings, get_settings
from backend.tenancy.tables import LoginAttempt

KNOWN, FRESH = "known", "fresh"  # the password-check lanes
KNOWN_LANE_PER_PAIR = 2  # checks of one known pair in its lane at once; more wait in the fresh lane

_last_prune = 0.0


def address_bucket(ip: str) -> str:
    """What one party holds, as sign-ins are counted: an IPv4 address as is, an IPv4-mapped IPv6 address
    (::ffff:a.b.c.d) as its IPv4, any other IPv6 address as its /64; anything else (no address) as given."""
    try:
        address = ipaddress.ip_address(ip.strip())
    except ValueError:
        return ip[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return f"{ipaddress.IPv6Address(int(address) >> 64 << 64)}/64"
    return str(address)


@dataclass(frozen=True)
class Admission:
    """An attempt let through to its password check."""

    id: int
    email: str
    ip: str  # the address's bucket
    known: bool  # the pair signed in before: exempt from the account's limit, checked in the known lane


class _Gate:
    """At most `size` checks at once; a free place goes to a waiting known pair before a waiting fresh one."""

    def __init__(self, size: int) -> None:
        self.free = size
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {KNOWN: deque(), FRESH: deque()}

    async def acquire(self, lane: str) -> None:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting[lane].append(granted)
        self._hand_out()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # handed the place just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        self.free += 1
        self._hand_out()

    def _hand_out(self) -> None:
        for lane in (KNOWN, FRESH):
            while self.free and self.waiting[lane]:
                granted = self.waiting[lane].popleft()
                if not granted.done():  # (a cancelled waiter is passed over)
                    self.free -= 1
                    granted.set_result(None)


@dataclass
class _LoopState:
    """Per event loop (tests run a loop per test; asyncio primitives are bound to their loop)."""

    gate: _Gate  # password checks at once
    admit: asyncio.Lock = field(default_factory=asyncio.Lock)  # write-and-count, one at a time
    in_flight: Counter[str] = field(default_factory=Counter)  # per lane: checks running or waiting
    known_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)  # known lane, per pair


_state: dict[int, _LoopState] = {}  # one entry: the current loop and gate size


_FAILED = LoginAttempt.succeeded == False  # noqa: E712 - SQL, not Python
_SUCCEEDED = LoginAttempt.succeeded == True  # noqa: E712


def _failures_since(since: datetime):
    return (LoginAttempt.at >= since) & _FAILED


async def is_known(email: str, ip: str) -> bool:
    """Whether the (e-mail, address bucket) pair signed in before (and is still remembered)."""
    known = (LoginAttempt.email == email) & (LoginAttempt.ip == ip) & _SUCCEEDED
    return await LoginAttempt.exists().where(known)


async def admit(email: str, ip: str) -> Admission:
    """Writes this attempt as a failure, then counts: refuses (429) while the (e-mail, address) pair is
    waiting out its backoff, or, unless the pair signed in before, the address or the account is.
    The attempt is to be marked as succeeded when the password is right, or forgotten when never checked."""
    settings = get_settings()
    await _prune(settings)
    ip = address_bucket(ip)
    async with _loop_state(settings).admit:
        known = await is_known(email, ip)
        attempt = LoginAttempt(email=email, ip=ip, at=clock.now(), succeeded=False)
        await attempt.save()
        limits = [
            ((LoginAttempt.email == email) & (LoginAttempt.ip == ip), settings.login_attempts_per_window)
        ]
        if (
            not known
        ):  # a known pair answers for itself alone: others' failures on its address or e-mail don't
            limits.append((LoginAttempt.ip == ip, settings.login_attempts_per_ip))
            limits.append((LoginAttempt.email == email, settings.login_attempts_per_account))
        wait = max([await _wait(settings, who, attempt.id, allowed) for who, allowed in limits])
        if wait <= 0:
            return Admission(attempt.id, email, ip, known)
        await forget(attempt.id)
    raise TooManyRequests(
        f"too many failed sign-in attempts; wait {math.ceil(wait)} seconds and try again",
        retry_after=math.ceil(wait),
    )


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
    return (latest["at"] + backoff(settings, failures - allowed) - now).total_seconds() if latest else 0.0


def backoff(settings: Settings, beyond: int) -> timedelta:
    """The wait after the latest failure once `beyond` failures past the allowed ones are counted: a window,
    doubled for each, at most the kept history."""
    window = timedelta(seconds=settings.login_window_seconds)
    return min(window * 2 ** min(beyond, 32), _history(settings))


def _history(settings: Settings) -> timedelta:
    """How far back failures count towards the backoff (older failures are pruned)."""
    return timedelta(seconds=settings.login_window_seconds * max(1, settings.login_attempts_keep_windows))


async def forget(attempt_id: int) -> None:
    """An attempt whose password was never checked does not count against anyone."""
    await LoginAttempt.delete().where(LoginAttempt.id == attempt_id)


async def succeeded(attempt_id: int) -> None:
    """Marks the attempt succeeded; it stays as its pair's one remembered success (the pair is known from now
    on), and the account keeps only its latest `login_known_addresses_per_account` known addresses."""
    await LoginAttempt.update({LoginAttempt.succeeded: True}).where(LoginAttempt.id == attempt_id)
    row = (
        await LoginAttempt.select(LoginAttempt.email, LoginAttempt.ip)
        .where(LoginAttempt.id == attempt_id)
        .first()
    )
    if row is None:
        return
    successes = (LoginAttempt.email == row["email"]) & _SUCCEEDED
    await LoginAttempt.delete().where(
        successes & (LoginAttempt.ip == row["ip"]) & (LoginAttempt.id != attempt_id)
    )
    keep = max(1, get_settings().login_known_addresses_per_account)
    rows = (
        await LoginAttempt.select(LoginAttempt.id).where(successes).order_by(LoginAttempt.at, ascending=False)
    )
    if older := [
        r["id"] for r in rows[keep:]
    ]:  # one success per pair: at most keep + a few (other processes)
        await LoginAttempt.delete().where(LoginAttempt.id.is_in(older))


async def check_password(
    hasher: PasswordHasher, stored_hash: str, password: str, admission: Admission | None = None
) -> bool:
    """argon2 in a worker thread, at most `login_hash_concurrency` at once; a known pair in its own lane,
    served first; 429 when the attempt's lane is full."""
    settings = get_settings()
    state = _loop_state(settings)
    pair = (admission.email, admission.ip) if admission else ("", "")
    lane = KNOWN if admission and admission.known and state.known_pairs[pair] < KNOWN_LANE_PER_PAIR else FRESH
    if state.in_flight[lane] >= settings.login_hash_concurrency + settings.login_hash_queue:
        raise TooManyRequests(
            "the server is busy checking other sign-ins; try again in a moment", retry_after=1
        )
    state.in_flight[lane] += 1
    if lane == KNOWN:
        state.known_pairs[pair] += 1
    try:
        await state.gate.acquire(lane)
        try:
            return await asyncio.to_thread(_verify, hasher, stored_hash, password)
        finally:
            state.gate.release()
    finally:
        state.in_flight[lane] -= 1
        if lane == KNOWN:
            state.known_pairs[pair] -= 1
            if not state.known_pairs[pair]:
                del state.known_pairs[pair]


def _verify(hasher: PasswordHasher, stored_hash: str, password: str) -> bool:
    try:
        return hasher.verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _loop_state(settings: Settings) -> _LoopState:
    key = hash((id(asyncio.get_running_loop()), settings.login_hash_concurrency))
    if key not in _state:
        _state.clear()
        _state[key] = _LoopState(_Gate(max(1, settings.login_hash_concurrency)))
    return _state[key]


async def _prune(settings: Settings) -> None:
    """At most once a window: drop failures older than `login_attempts_keep_windows` windows, and known
    addresses not used for `login_known_address_days`."""
    global _last_prune
    if time.monotonic() - _last_prune < settings.login_window_seconds:
        return
    _last_prune = time.monotonic()
    now = clock.now()
    await LoginAttempt.delete().where((LoginAttempt.at < now - _history(settings)) & _FAILED)
    known_since = now - timedelta(days=settings.login_known_address_days)
    await LoginAttempt.delete().where(LoginAttempt.at < known_since)
