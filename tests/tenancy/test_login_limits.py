"""Sign-in cannot stall the API and its limits hold under a parallel burst.

The requests go through `httpx.ASGITransport`, which runs the app on this event loop: the burst is truly
concurrent (Litestar's test client would serialise it), and the caller's address can be chosen."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from argon2 import PasswordHasher

from backend.settings import get_settings
from backend.tenancy import login_limits
from backend.tenancy.tables import LoginAttempt
from tests.support.console import _console_sign_in, console_api
from tests.support.databases import _shared_app
from tests.support.http import console_origin

ATTACKER = "203.0.113.66"


@asynccontextmanager
async def api(demo_db: str, ip: str = ATTACKER) -> AsyncIterator[httpx.AsyncClient]:
    app = _shared_app(demo_db)  # no lifespan through ASGITransport: its queries run in the test's loop
    transport = httpx.ASGITransport(app=app, client=(ip, 40000))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver.local", headers={"origin": console_origin()}
    ) as client:
        yield client


class CountingHasher:
    """Wraps argon2's verify: how often it ran, on which thread, and how many ran at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hold: float = 0.0) -> None:
        self.calls = 0
        self.on_event_loop_thread = 0
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()
        real = PasswordHasher.verify
        counter = self

        def verify(hasher: PasswordHasher, hash: str, password: str) -> bool:  # noqa: A002 - argon2's name
            with counter._lock:
                counter.calls += 1
                counter.running += 1
                counter.most_at_once = max(counter.most_at_once, counter.running)
                if threading.current_thread() is threading.main_thread():
                    counter.on_event_loop_thread += 1
            try:
                if hold:
                    time.sleep(hold)
                return real(hasher, hash, password)
            finally:
                with counter._lock:
                    counter.running -= 1

        monkeypatch.setattr(PasswordHasher, "verify", verify)


def _sign_in(client: httpx.AsyncClient, email: str, password: str):
    return client.post("/api/auth/login", json={"email": email, "password": password})


async def test_a_parallel_burst_on_one_email_gets_at_most_five_checks(demo_db: str, monkeypatch) -> None:
    hasher = CountingHasher(monkeypatch)
    limit = get_settings().login_attempts_per_window
    assert limit == 5
    async with api(demo_db) as client:
        burst = await asyncio.gather(
            *(_sign_in(client, "maria@acme.example", f"guess{i}") for i in range(20))
        )
        codes = [r.status_code for r in burst]
        assert hasher.calls <= limit, codes
        assert hasher.calls == limit  # not refused wholesale either: the first five in were checked
        assert codes.count(401) == hasher.calls and codes.count(429) == 20 - hasher.calls
        assert hasher.on_event_loop_thread == 0  # argon2 ran in worker threads, not on the event loop
        # the right password, still inside the window: the e-mail is locked, and no check is spent on it
        before = hasher.calls
        assert (await _sign_in(client, "maria@acme.example", "demo")).status_code == 429
        assert hasher.calls == before
        # another e-mail from the same address still signs in (the burst left at most 5 failures behind)
        assert (await _sign_in(client, "alice@acme.example", "demo")).status_code == 200
        # the window passes: maria's right password works again
        await LoginAttempt.update({LoginAttempt.at: datetime.now(UTC) - timedelta(hours=1)}).where(
            LoginAttempt.email == "maria@acme.example"
        )
        assert (await _sign_in(client, "maria@acme.example", "demo")).status_code == 200


async def test_without_the_limit_the_same_burst_checks_every_guess(demo_db: str, monkeypatch) -> None:
    """Positive control for the test above: the counter sees all 20 when the limit does not cut."""
    hasher = CountingHasher(monkeypatch)
    monkeypatch.setattr(get_settings(), "login_attempts_per_window", 100)
    monkeypatch.setattr(get_settings(), "login_attempts_per_ip", 100)
    monkeypatch.setattr(get_settings(), "login_attempts_per_account", 100)
    async with api(demo_db) as client:
        burst = await asyncio.gather(
            *(_sign_in(client, "maria@acme.example", f"guess{i}") for i in range(20))
        )
    assert [r.status_code for r in burst] == [401] * 20
    assert hasher.calls == 20


@pytest.mark.sqlite  # the in-process bound on checks at once, not an engine's
async def test_checks_run_at_most_n_at_once(demo_db: str, monkeypatch) -> None:
    hasher = CountingHasher(monkeypatch, hold=0.05)
    monkeypatch.setattr(get_settings(), "login_attempts_per_ip", 100)
    async with api(demo_db) as client:
        emails = [f"nobody{i}@acme.example" for i in range(8)]
        burst = await asyncio.gather(*(_sign_in(client, email, "x") for email in emails))
    assert [r.status_code for r in burst] == [401] * 8  # unknown e-mails cost a (dummy) check too
    assert hasher.calls == 8
    assert hasher.most_at_once <= get_settings().login_hash_concurrency


@pytest.mark.sqlite  # the in-process queue, not an engine's (the counts under a burst: both engines)
async def test_a_full_queue_turns_new_sign_ins_away(demo_db: str, monkeypatch) -> None:
    hasher = CountingHasher(monkeypatch, hold=0.3)
    monkeypatch.setattr(get_settings(), "login_hash_concurrency", 1)
    monkeypatch.setattr(get_settings(), "login_hash_queue", 1)
    monkeypatch.setattr(get_settings(), "login_attempts_per_ip", 100)
    async with api(demo_db) as client:
        burst = await asyncio.gather(*(_sign_in(client, f"n{i}@acme.example", "x") for i in range(6)))
        codes = [r.status_code for r in burst]
        assert codes.count(429) >= 1 and hasher.calls == codes.count(401) <= 6
        busy = [r for r in burst if r.status_code == 429]
        assert "busy" in busy[0].json()["detail"]
        # turned away before a check: not counted as a failure against anyone
        assert await LoginAttempt.count() == codes.count(401)
        assert (await _sign_in(client, "alice@acme.example", "demo")).status_code == 200  # positive control


# the address's limit, the app's (counts under a parallel burst on both engines: the first two tests)
@pytest.mark.sqlite
async def test_one_address_guessing_across_many_emails_is_limited(demo_db: str, monkeypatch) -> None:
    hasher = CountingHasher(monkeypatch)
    monkeypatch.setattr(get_settings(), "login_attempts_per_ip", 8)
    async with api(demo_db) as attacker:
        codes = [(await _sign_in(attacker, f"user{i}@acme.example", "demo")).status_code for i in range(12)]
        assert codes == [401] * 8 + [429] * 4
        assert hasher.calls == 8
        # the address is locked even for a right password
        assert (await _sign_in(attacker, "alice@acme.example", "demo")).status_code == 429
    async with api(demo_db, ip="198.51.100.7") as someone_else:  # positive control: another address
        assert (await _sign_in(someone_else, "alice@acme.example", "demo")).status_code == 200
    rows = await LoginAttempt.select(LoginAttempt.ip).where(LoginAttempt.email == "user0@acme.example")
    assert [r["ip"] for r in rows] == [ATTACKER]  # the address recorded is the caller's


async def test_old_attempts_are_pruned(demo_db: str, monkeypatch) -> None:
    settings = get_settings()
    keep = timedelta(seconds=settings.login_window_seconds * settings.login_attempts_keep_windows)
    now = datetime.now(UTC)
    await LoginAttempt.insert(
        LoginAttempt(email="old@acme.example", ip="192.0.2.1", at=now - keep - timedelta(minutes=1)),
        LoginAttempt(email="recent@acme.example", ip="192.0.2.1", at=now - keep + timedelta(minutes=1)),
    )
    monkeypatch.setattr(login_limits, "_last_prune", 0.0)
    async with api(demo_db) as client:
        assert (await _sign_in(client, "alice@acme.example", "demo")).status_code == 200
    emails = {r["email"] for r in await LoginAttempt.select(LoginAttempt.email)}
    assert "old@acme.example" not in emails
    assert "recent@acme.example" in emails  # positive control: only what is past the keep time goes


# --- counted on what the one guessing controls (N-M2): the browser's address as the console forwards it ---

ELSEWHERE = "198.51.100.7"


# which address is counted, the app's (counts under a parallel burst on both engines: the first two tests)
@pytest.mark.sqlite
async def test_a_flood_through_the_console_slows_its_address_and_nobody_else(
    demo_db: str, monkeypatch
) -> None:
    """200 wrong passwords in well under a minute, for maria and for made-up e-mails, from one browser
    through the console: maria and alice still sign in from their own addresses; the flood's own address
    is turned away even with maria's right password (positive control)."""
    hasher = CountingHasher(monkeypatch)
    settings = get_settings()
    async with console_api(demo_db) as config:
        emails = ["maria@acme.example" if i % 2 else f"nobody{i}@acme.example" for i in range(200)]
        codes: list[int] = []
        for start in range(0, 200, 50):
            codes += await asyncio.gather(
                *(
                    _console_sign_in(config, e, f"guess{i}", ATTACKER)
                    for i, e in enumerate(emails[start:][:50])
                )
            )
        assert codes.count(401) + codes.count(429) == 200
        assert hasher.calls == codes.count(401) <= settings.login_attempts_per_ip  # the address is slowed
        before = hasher.calls
        assert await _console_sign_in(config, "maria@acme.example", "demo", ATTACKER) == 429
        assert hasher.calls == before  # turned away before any check
        # everyone else, through the same console: their own addresses, their own counts
        assert await _console_sign_in(config, "maria@acme.example", "demo", ELSEWHERE) == 200
        assert await _console_sign_in(config, "alice@acme.example", "demo", "2001:db8::5") == 200
    addresses = {r["ip"] for r in await LoginAttempt.select(LoginAttempt.ip)}
    # the browsers' (an IPv6 one as its /64), never the console's own
    assert addresses == {ATTACKER, ELSEWHERE, "2001:db8::/64"}


@pytest.mark.sqlite  # the control of the test above, on the same engine
async def test_the_same_flood_counted_on_the_consoles_address_locks_everyone_out(
    demo_db: str, monkeypatch
) -> None:
    """Positive control for the test above (what the review saw): without the forwarded address, the
    console's one address takes every failure, and maria's right password from another browser is refused."""
    async with console_api(demo_db) as config:
        burst = [_console_sign_in(config, f"nobody{i}@acme.example", "x", "") for i in range(25)]
        assert (await asyncio.gather(*burst)).count(429) >= 1
        assert await _console_sign_in(config, "maria@acme.example", "demo", "") == 429


@pytest.mark.sqlite  # which address is counted, not an engine's
async def test_a_forged_forwarding_header_is_ignored(demo_db: str, monkeypatch) -> None:
    """A caller naming a fresh address with each guess (no signature, a signature with another key, or a
    stale one) is still counted on its own address: five checks, then 429."""
    from backend.tenancy import forwarded

    hasher = CountingHasher(monkeypatch)
    maria = "maria@acme.example"
    forged = [
        {forwarded.ADDRESS_HEADER: "192.0.2.1"},
        {forwarded.ADDRESS_HEADER: "192.0.2.2", forwarded.SIGNATURE_HEADER: "1:00"},
        forwarded.headers("192.0.2.3", maria, key=b"a guessed secret of thirty-two bytes!"),
        forwarded.headers("192.0.2.4", maria, at=int(time.time()) - 3600),  # right key, an hour old: a replay
        # signed for another address
        {**forwarded.headers("192.0.2.5", maria), forwarded.ADDRESS_HEADER: "192.0.2.6"},
        forwarded.headers("192.0.2.7", "alice@acme.example"),  # signed for another e-mail's sign-in
        forwarded.headers("192.0.2.8", maria, purpose=forwarded.PROBE),  # the console's probe, not a sign-in
    ]
    async with api(demo_db) as attacker:
        codes = []
        for i in range(10):
            body = {"email": "maria@acme.example", "password": f"guess{i}"}
            r = await attacker.post("/api/auth/login", json=body, headers=forged[i % len(forged)])
            codes.append(r.status_code)
        assert codes == [401] * 5 + [429] * 5
        assert hasher.calls == 5
        rows = await LoginAttempt.select(LoginAttempt.ip)
        assert {r["ip"] for r in rows} == {ATTACKER}
        # positive control: the console's signature, fresh, is believed (and counts on that address)
        r = await attacker.post(
            "/api/auth/login",
            json={"email": "maria@acme.example", "password": "demo"},
            headers=forwarded.headers(ELSEWHERE, "Maria@acme.example "),  # as typed: compared as signed in
        )
        assert r.status_code == 200
        assert await LoginAttempt.count().where(LoginAttempt.ip == ELSEWHERE) == 1


@pytest.mark.sqlite
async def test_a_captured_signature_is_good_once_and_for_its_own_e_mail(demo_db: str, monkeypatch) -> None:
    """Someone who sees the console's call for alice's sign-in replays its header: for maria's e-mail, and
    again for alice's. Both are counted on the replayer's own address; the original was believed (control)."""
    from backend.tenancy import forwarded

    CountingHasher(monkeypatch)
    captured = forwarded.headers(ELSEWHERE, "alice@acme.example")
    async with api(demo_db) as client:
        body = {"email": "alice@acme.example", "password": "demo"}
        assert (await client.post("/api/auth/login", json=body, headers=captured)).status_code == 200
        for email in ("maria@acme.example", "alice@acme.example"):
            body = {"email": email, "password": "guess"}
            assert (await client.post("/api/auth/login", json=body, headers=captured)).status_code == 401
    rows = await LoginAttempt.select(LoginAttempt.email, LoginAttempt.ip).order_by(LoginAttempt.id)
    assert [(r["email"], r["ip"]) for r in rows] == [
        ("alice@acme.example", ELSEWHERE),  # the console's own call: believed
        ("maria@acme.example", ATTACKER),  # replayed for another e-mail: the caller's address
        ("alice@acme.example", ATTACKER),  # replayed as it was: seen before
    ]


def _wait_said(response: httpx.Response) -> int:
    """The seconds a 429 tells the person to wait (a few less than the backoff: the request took time)."""
    match = re.search(r"wait (\d+) seconds", response.json()["detail"])
    assert match, response.text
    return int(match.group(1))


async def test_past_the_limit_the_wait_doubles_instead_of_a_wall(demo_db: str, monkeypatch) -> None:
    """The pair may fail five times; then one more guess a window after the latest failure, then after two
    windows, then four: the guessing slows down for good, and a person who mistyped waits a minute."""
    window = get_settings().login_window_seconds
    CountingHasher(monkeypatch)

    async def age(seconds: float) -> None:  # as if `seconds` had passed
        await LoginAttempt.update({LoginAttempt.at: LoginAttempt.at - timedelta(seconds=seconds)}, force=True)

    async with api(demo_db) as client:
        for i in range(5):
            assert (await _sign_in(client, "maria@acme.example", f"guess{i}")).status_code == 401
        refused = await _sign_in(client, "maria@acme.example", "demo")
        assert refused.status_code == 429 and window - 5 <= _wait_said(refused) <= window
        for doubled in (1, 2, 4):
            await age(window * doubled - 15)  # a margin for the real time these requests take
            assert (await _sign_in(client, "maria@acme.example", "guess")).status_code == 429  # not yet
            await age(15)
            assert (await _sign_in(client, "maria@acme.example", "guess")).status_code == 401  # one guess
            refused = await _sign_in(client, "maria@acme.example", "demo")
            assert refused.status_code == 429
            assert window * doubled * 2 - 5 <= _wait_said(refused) <= window * doubled * 2
        # the kept history passes: the right password works again
        await age(window * get_settings().login_attempts_keep_windows)
        assert (await _sign_in(client, "maria@acme.example", "demo")).status_code == 200
