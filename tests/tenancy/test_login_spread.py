"""Sign-in limits one attacker cannot turn against everyone (D-M4): an IPv6 /64 is one address, an account's
failures slow guessing spread over many addresses without locking its owner out, and a flood from fresh
addresses cannot make a known person's sign-in "busy". Each hostile test sits beside the control that shows
it would notice the protection gone. No timing: waits are read from the API's answer under a fixed clock,
and the password check is a stand-in the test holds and releases."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import pytest

from backend import clock
from backend.settings import get_settings
from backend.tenancy import login_limits
from backend.tenancy.login_limits import FRESH, KNOWN, address_bucket
from backend.tenancy.tables import LoginAttempt
from tests.support.console import _console_sign_in, console_api

pytestmark = pytest.mark.sqlite  # the counting is the same SQL on both engines (test_login_limits runs both)

MARIA_AT = "198.51.100.7"


class Checks:
    """Stands in for argon2 (`login_limits._verify`): "demo" is right; records each password in the order the
    checks ran, and, while `hold` is set, keeps each check waiting until the test releases it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        self.hold = False
        self.released = threading.Event()
        monkeypatch.setattr(login_limits, "_verify", self._verify)

    def _verify(self, hasher, stored_hash: str, password: str) -> bool:
        self.seen.append(password)
        if self.hold:
            self.released.wait(timeout=30)  # a bound only so a failing test cannot hang the suite
        return password == "demo"


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    """The service's clock, stopped; the test moves it (`now[0] += ...`)."""
    now = [datetime.now(UTC).replace(microsecond=0)]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    return now


async def until(condition, what: str) -> None:
    """Waits (a bounded number of turns of the event loop) until `condition()` holds."""
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


# --- an address is what one party holds: an IPv6 /64, an IPv4-mapped address as its IPv4 -------------------


def test_address_buckets() -> None:
    assert address_bucket("2001:db8:1:2::1") == address_bucket("2001:db8:1:2:ffff:ffff:ffff:fffe")
    assert address_bucket("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert address_bucket("2001:db8:1:3::1") != address_bucket("2001:db8:1:2::1")  # the next /64: another
    assert address_bucket("::ffff:203.0.113.66") == address_bucket("203.0.113.66") == "203.0.113.66"
    assert address_bucket("203.0.113.67") != address_bucket("203.0.113.66")  # IPv4: each address its own
    assert address_bucket("testclient") == "testclient"  # not an address: as given


async def test_guesses_from_one_ipv6_64_share_the_pairs_limit(demo_db: str, monkeypatch) -> None:
    """The attacker holds 2001:db8:66:1::/64 and takes a fresh address in it for each guess at maria:
    five are checked, then 429, as from one address. Also an IPv4 address in its mapped form is the same."""
    checks = Checks(monkeypatch)
    async with console_api(demo_db) as config:
        codes = [
            await _console_sign_in(config, "maria@acme.example", f"guess{i}", f"2001:db8:66:1::{i + 1:x}")
            for i in range(7)
        ]
        assert codes == [401] * 5 + [429] * 2
        mapped = [
            await _console_sign_in(config, "alice@acme.example", f"guess{i}", address)
            for i, address in enumerate(["203.0.113.66", "::ffff:203.0.113.66"] * 3)
        ]
        assert mapped == [401] * 5 + [429]
    assert checks.seen.count("guess0") == 2 and len(checks.seen) == 10  # no check for a refused one


async def test_control_distinct_64s_are_distinct_addresses(demo_db: str, monkeypatch) -> None:
    """Control for the test above: one guess from each of seven /64s (fewer than the account's limit) is
    checked every time; a bucket wider than a /64 would have cut them."""
    checks = Checks(monkeypatch)
    async with console_api(demo_db) as config:
        codes = [
            await _console_sign_in(config, "maria@acme.example", f"guess{i}", f"2001:db8:66:{i + 1:x}::1")
            for i in range(7)
        ]
    assert codes == [401] * 7 and len(checks.seen) == 7
    buckets = {r["ip"] for r in await LoginAttempt.select(LoginAttempt.ip)}
    assert buckets == {f"2001:db8:66:{i + 1:x}::/64" for i in range(7)}


# --- the account's soft limit: guessing from many addresses slows down; the owner still signs in ------------


async def test_guessing_one_account_from_many_addresses_slows_down_but_its_owner_signs_in(
    demo_db: str, monkeypatch, fixed_clock: list[datetime]
) -> None:
    """Maria signed in from her address once. An attacker then guesses her password from a new address for
    each guess (each far under the address and pair limits): the account lets `login_attempts_per_account`
    through, then one guess a window after the latest, then two windows, then four (never a wall; once the
    first failures are older than the kept history they no longer count: about `allowed` + 3 guesses per ten
    minutes, where nothing but argon2's speed held them before). Maria, from her known address, signs in at
    once throughout."""
    settings = get_settings()
    allowed, window = settings.login_attempts_per_account, settings.login_window_seconds
    checks = Checks(monkeypatch)
    attacker = (f"192.0.2.{i}" for i in range(1, 250))
    async with console_api(demo_db) as config:
        assert await _console_sign_in(config, "maria@acme.example", "demo", MARIA_AT) == 200
        codes = [
            await _console_sign_in(config, "maria@acme.example", f"g{i}", next(attacker)) for i in range(12)
        ]
        assert codes == [401] * allowed + [429] * (12 - allowed)
        for beyond in range(3):  # 1 + 2 + 4 windows: all inside the kept history of ten windows
            wait = login_limits.backoff(settings, beyond).total_seconds()
            assert wait == min(window * 2**beyond, window * settings.login_attempts_keep_windows)
            refused = await _console_detail(config, "maria@acme.example", "g", next(attacker))
            assert f"wait {int(wait)} seconds" in refused
            # the owner, from the address she signed in from before, is never kept waiting
            assert await _console_sign_in(config, "maria@acme.example", "demo", MARIA_AT) == 200
            fixed_clock[0] += timedelta(seconds=wait - 1)
            assert await _console_sign_in(config, "maria@acme.example", "g", next(attacker)) == 429
            fixed_clock[0] += timedelta(seconds=1)
            assert await _console_sign_in(config, "maria@acme.example", f"g{beyond}", next(attacker)) == 401
        # control: the right password from an address maria never used is held like the attacker's guesses
        # (the limit is really on, and her known address is what lets her through)
        assert await _console_sign_in(config, "maria@acme.example", "demo", "198.51.100.200") == 429
    assert checks.seen.count("demo") == 4  # her five sign-ins from home were checked, the stranger's not


async def test_control_without_the_account_limit_guessing_from_many_addresses_is_unlimited(
    demo_db: str, monkeypatch, fixed_clock: list[datetime]
) -> None:
    """Control (what the review saw): with the account's limit out of reach, fifteen guesses from fifteen
    addresses (past the default limit of ten) are all checked."""
    monkeypatch.setattr(get_settings(), "login_attempts_per_account", 10_000)
    checks = Checks(monkeypatch)
    async with console_api(demo_db) as config:
        codes = [
            await _console_sign_in(config, "maria@acme.example", f"g{i}", f"192.0.2.{i + 1}")
            for i in range(15)
        ]
    assert codes == [401] * 15 and len(checks.seen) == 15


async def test_a_flood_of_other_e_mails_from_a_shared_address_does_not_keep_a_known_person_out(
    demo_db: str, monkeypatch
) -> None:
    """The attacker shares maria's office address (one NAT, or a proxy FORWARDED_ALLOW_IPS does not name) and
    fails for made-up e-mails until the address is held. Maria, who signed in from the office before, still
    does; alice, who never did, is held with the address (control: the address's limit is on)."""
    Checks(monkeypatch)
    office = "198.51.100.20"
    per_ip = get_settings().login_attempts_per_ip
    async with console_api(demo_db) as config:
        assert await _console_sign_in(config, "maria@acme.example", "demo", office) == 200
        codes = [await _console_sign_in(config, f"x{i}@acme.example", "g", office) for i in range(per_ip + 2)]
        assert codes == [401] * per_ip + [429] * 2
        assert await _console_sign_in(config, "maria@acme.example", "demo", office) == 200
        assert await _console_sign_in(config, "alice@acme.example", "demo", office) == 429


async def _console_detail(config, email: str, password: str, browser: str) -> str:
    from console.api import Api, ApiError

    with pytest.raises(ApiError) as refused:
        await Api(config).login(email, password, client_address=browser)
    assert refused.value.status == 429
    return refused.value.message


async def test_known_addresses_are_remembered_per_account_and_bounded(demo_db: str, monkeypatch) -> None:
    """A person signing in from ever new addresses leaves at most `login_known_addresses_per_account` of
    them remembered: the latest ones (control: the latest is known, the oldest forgotten)."""
    Checks(monkeypatch)
    monkeypatch.setattr(get_settings(), "login_known_addresses_per_account", 3)
    keep = 3
    async with console_api(demo_db) as config:
        for i in range(keep + 3):
            for _ in range(2):  # twice from each: one remembered success per address
                assert await _console_sign_in(config, "maria@acme.example", "demo", f"192.0.2.{i + 1}") == 200
    remembered = await LoginAttempt.select(LoginAttempt.ip).where(LoginAttempt.succeeded == True)  # noqa: E712
    assert sorted(r["ip"] for r in remembered) == sorted(f"192.0.2.{i + 1}" for i in range(3, keep + 3))
    assert await login_limits.is_known("maria@acme.example", f"192.0.2.{keep + 3}")
    assert not await login_limits.is_known("maria@acme.example", "192.0.2.1")
    assert not await login_limits.is_known("alice@acme.example", f"192.0.2.{keep + 3}")  # per account


# --- the password-check lanes: a flood from fresh addresses cannot make a known person's sign-in "busy" ------


async def _flood_then_maria(demo_db: str, monkeypatch) -> tuple[list[int], int, list[str]]:
    """One check at a time and one waiting per lane. Maria signed in from home before. A flood from fresh
    addresses (each its first guess) fills the fresh lane, its next one gets "busy"; then maria signs in from
    home. Returns the flood's codes, maria's, and the order the checks ran in."""
    monkeypatch.setattr(get_settings(), "login_hash_concurrency", 1)
    monkeypatch.setattr(get_settings(), "login_hash_queue", 1)
    checks = Checks(monkeypatch)
    async with console_api(demo_db) as config:
        assert await _console_sign_in(config, "maria@acme.example", "demo", MARIA_AT) == 200
        checks.seen.clear()
        checks.hold = True
        try:
            state = login_limits._loop_state(get_settings())
            flood = [
                asyncio.create_task(
                    _console_sign_in(config, f"n{i}@acme.example", f"f{i}", f"203.0.113.{i + 1}")
                )
                for i in range(2)
            ]
            await until(lambda: state.in_flight[FRESH] == 2 and len(checks.seen) == 1, "the fresh lane full")
            assert await _console_sign_in(config, "n9@acme.example", "f9", "203.0.113.99") == 429  # busy
            maria = asyncio.create_task(_console_sign_in(config, "maria@acme.example", "demo", MARIA_AT))
            await until(
                lambda: state.in_flight[KNOWN] == 1 or maria.done(), "maria's sign-in queued or answered"
            )
        finally:
            checks.released.set()
        codes = await asyncio.gather(*flood)
        return codes, await maria, checks.seen


async def test_a_flood_from_fresh_addresses_does_not_turn_a_known_address_away(
    demo_db: str, monkeypatch
) -> None:
    codes, maria, order = await _flood_then_maria(demo_db, monkeypatch)
    assert codes == [401, 401]
    assert maria == 200
    assert order[1] == "demo"  # and she went before the flood's waiting check


async def test_control_without_the_known_lane_the_flood_turns_maria_away(demo_db: str, monkeypatch) -> None:
    """Control: the same flood with nobody known (one shared lane, as before): maria gets 429 "busy"."""

    async def never_known(email: str, ip: str) -> bool:
        return False

    monkeypatch.setattr(login_limits, "is_known", never_known)
    codes, maria, _ = await _flood_then_maria(demo_db, monkeypatch)
    assert codes == [401, 401]
    assert maria == 429


async def test_one_known_pair_cannot_fill_the_known_lane(demo_db: str, monkeypatch) -> None:
    """Someone who knows their own password, signing in again and again from their known address, holds at
    most two places of the known lane; their further sign-ins queue in the fresh lane (control: maria,
    known too, still gets the known lane's next place)."""
    monkeypatch.setattr(get_settings(), "login_hash_concurrency", 1)
    monkeypatch.setattr(get_settings(), "login_hash_queue", 8)
    checks = Checks(monkeypatch)
    async with console_api(demo_db) as config:
        for email, address in (("alice@acme.example", "203.0.113.5"), ("maria@acme.example", MARIA_AT)):
            assert await _console_sign_in(config, email, "demo", address) == 200
        checks.seen.clear()
        checks.hold = True
        state = login_limits._loop_state(get_settings())
        try:
            alice = [
                asyncio.create_task(_console_sign_in(config, "alice@acme.example", "demo", "203.0.113.5"))
                for _ in range(5)
            ]
            await until(lambda: state.in_flight[KNOWN] + state.in_flight[FRESH] == 5, "alice's five queued")
            assert (state.in_flight[KNOWN], state.in_flight[FRESH]) == (2, 3)
            maria = asyncio.create_task(_console_sign_in(config, "maria@acme.example", "demo!", MARIA_AT))
            await until(lambda: state.in_flight[KNOWN] == 3, "maria queued in the known lane")
        finally:
            checks.released.set()
        assert await asyncio.gather(*alice) == [200] * 5
        assert await maria == 401
    assert checks.seen.index("demo!") <= 2  # after alice's running one and at most one other of hers


async def test_the_gate_serves_known_first_and_passes_over_a_cancelled_waiter() -> None:
    """The gate itself: one place; a fresh waiter, then a known one: the known goes first when the place is
    freed. A waiter cancelled while waiting (its client gone) does not keep the place from the next one."""
    gate = login_limits._Gate(1)
    await gate.acquire(FRESH)
    order: list[str] = []

    async def wait(lane: str, name: str) -> None:
        await gate.acquire(lane)
        order.append(name)

    fresh, gone, known = (
        asyncio.create_task(wait(FRESH, "fresh")),
        asyncio.create_task(wait(KNOWN, "gone")),
        asyncio.create_task(wait(KNOWN, "known")),
    )
    await until(lambda: len(gate.waiting[FRESH]) + len(gate.waiting[KNOWN]) == 3, "three waiting")
    gone.cancel()
    gate.release()
    await known
    assert order == ["known"] and not fresh.done()
    gate.release()
    await fresh
    assert order == ["known", "fresh"] and gone.cancelled()
    gate.release()
    assert gate.free == 1  # every place given back
