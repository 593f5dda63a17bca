"""Through the console's own sign-in form, as the review tried it (N-M2): one browser typing wrong passwords
for made-up e-mails slows that browser's address only. Maria, in another browser, signs in meanwhile; the
flooding browser is turned away even with her right password (positive control). Every browser reaches the
console from its own address; the console reaches the API from one (the positive control of the lock-out
itself, counted on the console's address, is in tests/tenancy/test_login_limits.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from nicegui import core
from nicegui.testing.user import User

from backend.settings import get_settings
from backend.tenancy.tables import LoginAttempt
from console import session

pytestmark = pytest.mark.sqlite

ATTACKER = "203.0.113.66"
MARIA_AT = "198.51.100.7"
REFUSED = "Too many attempts"


class SignInsSeen(httpx.AsyncBaseTransport):
    """Wraps the console's transport to the API: the status of every sign-in call, in order (so the test
    knows when a form submission has been answered)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.statuses: list[int] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path == "/api/v1/auth/login":  # the typed client speaks the version the document names
            self.statuses.append(response.status_code)
        return response

    async def answered(self, count: int) -> list[int]:
        for _ in range(200):
            if len(self.statuses) >= count:
                return self.statuses
            await asyncio.sleep(0.05)
        raise AssertionError(f"only {len(self.statuses)} of {count} sign-ins were answered")


def browser_at(address: str) -> User:
    """Another simulated browser of the running console, connecting from `address`."""
    transport = httpx.ASGITransport(app=core.app, client=(address, 50000))
    return User(httpx.AsyncClient(transport=transport, base_url="http://test"))


async def submit(browser: User, email: str, password: str) -> None:
    browser.find(marker="email").clear().type(email)
    browser.find(marker="password").clear().type(password)
    browser.find(marker="sign-in").click()


async def test_a_flood_through_the_form_slows_its_browser_and_nobody_else(user: User) -> None:
    limit = get_settings().login_attempts_per_ip
    seen = SignInsSeen(session.config().transport)
    session.config().transport = seen
    attacker = browser_at(ATTACKER)
    await attacker.open("/login")
    for i in range(limit + 5):  # made-up e-mails, as the review tried it
        await submit(attacker, f"nobody{i}@acme.example", f"guess{i}")
        await seen.answered(i + 1)
    await attacker.should_see(REFUSED, retries=50)
    # positive control: the flooding browser's own address is turned away, even with maria's password
    await submit(attacker, "maria@acme.example", "demo")
    assert await seen.answered(limit + 6) == [401] * limit + [429] * 6
    await attacker.should_see(REFUSED)
    await attacker.should_see("seconds and try again")  # how long, from the API's answer
    await attacker.should_not_see(marker="page-title")

    maria = browser_at(MARIA_AT)
    await maria.open("/login")
    await submit(maria, "maria@acme.example", "demo")
    await maria.should_see(marker="page-title", retries=50)  # signed in, on her runs
    assert seen.statuses[-1] == 200

    rows = await LoginAttempt.select(LoginAttempt.ip, LoginAttempt.succeeded)
    assert {r["ip"] for r in rows} == {ATTACKER, MARIA_AT}  # the browsers' addresses, never the console's
    assert [r["ip"] for r in rows if r["succeeded"]] == [MARIA_AT]
