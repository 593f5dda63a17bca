"""The console's side of session safety: it signs out only by a POST, redirects after sign-in only to its
own paths, takes the session from the cookie, and sends its own Origin (which the API insists on)."""

import httpx
import pytest
from nicegui.testing.user import User

from backend.tenancy.tables import Session
from backend.tenancy.tables import User as AppUser
from console.api import Api, ApiConfig, ApiError
from console.pages.login import _safe_next
from tests.support.console import sign_in

pytestmark = pytest.mark.sqlite

HOSTILE_NEXT = [
    "/\\evil.example",
    "/\\/evil.example",
    "/\tevil.example",
    "/\t/evil.example",
    "//evil.example",
    "///evil.example",
    "https://evil.example/runs",
    "javascript:alert(1)",
    "/runs\r\nSet-Cookie: x=1",
    "/runs\x00",
    " /runs",
    "evil.example",
    "/login?next=//evil.example",
    "/logout",
]


@pytest.mark.parametrize("target", HOSTILE_NEXT)
def test_next_refuses_anything_but_a_local_path(target: str) -> None:
    assert _safe_next(target) == "/runs"


@pytest.mark.parametrize("target", ["/runs", "/runs/12", "/audit?q=run", "/settings#tokens", "/"])
def test_next_keeps_local_paths(target: str) -> None:
    assert _safe_next(target) == target  # positive control: the filter is not "always /runs"


async def test_sign_in_with_a_hostile_next_lands_on_runs(user: User) -> None:
    await sign_in(user, "admin@acme.example", then="/%5Cevil.example")
    assert user.back_history[-1] == "/runs"


async def test_sign_in_with_a_local_next_goes_there(user: User) -> None:
    await sign_in(user, "admin@acme.example", then="/audit")
    assert user.back_history[-1] == "/audit"  # positive control for the test above


async def _sessions(email: str) -> int:
    user_id = (await AppUser.select(AppUser.id).where(AppUser.email == email).first())["id"]
    return await Session.count().where(Session.user == user_id)


async def test_loading_the_logout_page_signs_nobody_out(user: User) -> None:
    """A foreign page can make the browser GET /logout (an <img src>); that must not end the session."""
    await sign_in(user, "alice@acme.example")
    assert await _sessions("alice@acme.example") == 1
    await user.open("/logout")
    await user.should_see("Sign out of Cleanroom?")
    assert await _sessions("alice@acme.example") == 1  # the API session is alive
    await user.open("/runs")
    await user.should_see("My runs", retries=50)  # and the console still knows her
    await user.open("/logout")
    user.find(marker="confirm-sign-out").click()  # positive control: the button signs out, by POST
    await user.should_see("Sign in", retries=50)
    assert await _sessions("alice@acme.example") == 0


async def test_the_user_menu_ends_the_api_session(user: User) -> None:
    await sign_in(user, "alice@acme.example")
    user.find(marker="user-menu").click()
    user.find(marker="sign-out").click()
    await user.should_see("Sign in", retries=50)
    assert await _sessions("alice@acme.example") == 0


async def test_the_console_sends_its_origin_and_the_api_needs_it(api_app) -> None:
    transport = httpx.ASGITransport(app=api_app)
    ours = Api(ApiConfig("http://api.test", transport=transport))
    await ours.login("admin@acme.example", "demo")
    assert ours.session  # from the Set-Cookie: the body has no session any more
    settings = await ours.company_settings()
    flipped = not settings.followup_without_reapproval
    changed = await ours.update_company_settings(followup_without_reapproval=flipped)
    assert changed.followup_without_reapproval is flipped
    foreign = Api(
        ApiConfig("http://api.test", transport=transport, origin="http://evil.example"), ours.session
    )
    with pytest.raises(ApiError) as refused:
        await foreign.update_company_settings(followup_without_reapproval=not flipped)
    assert refused.value.status == 403 and refused.value.code == "csrf_origin"


async def test_the_console_answers_only_to_its_own_host_names() -> None:
    """DNS rebinding to the console: evil.example now resolves to 127.0.0.1:8401."""
    from fastapi import FastAPI

    from backend.settings import get_settings
    from console.main import guard_hosts

    console = FastAPI()
    console.get("/login")(lambda: {"page": "sign in"})
    guard_hosts(console, get_settings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=console), base_url="http://x") as client:
        for host in ("evil.example", "evil.example:8401", "127.0.0.1.evil.example"):
            assert (await client.get("/login", headers={"host": host})).status_code == 400, host
        for host in ("127.0.0.1:8401", "localhost:8401", "[::1]:8401"):
            assert (await client.get("/login", headers={"host": host})).status_code == 200, host
