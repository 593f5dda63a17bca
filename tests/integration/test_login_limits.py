"""Sign-in cannot stall the API and its limits hold under a parallel burst.

The requests go through `httpx.ASGITransport`, which runs the app on this event loop: the burst is truly
concurrent (Litestar's test client would serialise it), and the caller's address can be chosen."""

from __future__ import annotations

import asyncio
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
from tests.conftest import console_origin

ATTACKER = "203.0.113.66"


@asynccontextmanager
async def api(demo_db: str, ip: str = ATTACKER) -> AsyncIterator[httpx.AsyncClient]:
    from backend.app import create_app

    app = create_app(database_url=demo_db, run_hooks=False, pool=False)
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
    async with api(demo_db) as client:
        burst = await asyncio.gather(
            *(_sign_in(client, "maria@acme.example", f"guess{i}") for i in range(20))
        )
    assert [r.status_code for r in burst] == [401] * 20
    assert hasher.calls == 20


async def test_checks_run_at_most_n_at_once(demo_db: str, monkeypatch) -> None:
    hasher = CountingHasher(monkeypatch, hold=0.05)
    monkeypatch.setattr(get_settings(), "login_attempts_per_ip", 100)
    async with api(demo_db) as client:
        emails = [f"nobody{i}@acme.example" for i in range(8)]
        burst = await asyncio.gather(*(_sign_in(client, email, "x") for email in emails))
    assert [r.status_code for r in burst] == [401] * 8  # unknown e-mails cost a (dummy) check too
    assert hasher.calls == 8
    assert hasher.most_at_once <= get_settings().login_hash_concurrency


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
