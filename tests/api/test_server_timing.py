"""`Server-Timing: app;dur=<ms>` (`backend/timing.py`): on every answer when `server_timing` is set, the refused
ones included, and on none by default (the control is the same app built without it). The control-plane bench
reads it to tell the API's time from its own clients' lateness."""

from __future__ import annotations

import time

import httpx
import pytest

from backend.settings import get_settings
from backend.timing import HEADER, app_ms
from tests.support.http import console_origin

pytestmark = pytest.mark.sqlite  # the middleware's header, not an engine's


async def _answers(demo_db: str) -> list[httpx.Response]:
    from backend.app import create_app

    app = create_app(database_url=demo_db, run_hooks=False, pool=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", headers={"origin": console_origin()}
    ) as client:
        signed_in = await client.post(
            "/api/auth/login", json={"email": "alice@acme.example", "password": "demo"}
        )
        refused = await client.get("/api/runs", headers={"Authorization": "Bearer not-a-token"})
        return [signed_in, refused]


@pytest.mark.parametrize("on", [True, False])
async def test_answers_carry_the_apps_time_only_when_asked(demo_db: str, monkeypatch, on: bool) -> None:
    monkeypatch.setattr(get_settings(), "server_timing", on)
    signed_in, refused = await _answers(demo_db)
    assert signed_in.status_code == 200 and refused.status_code == 401, (signed_in.text, refused.text)
    for answer in (signed_in, refused):
        took = app_ms(answer.headers.get(HEADER))
        if on:
            assert took is not None and took > 0, answer.headers
        else:
            assert HEADER not in answer.headers, answer.headers


async def test_the_time_is_the_apps_own(demo_db: str, monkeypatch) -> None:
    """A handler made slower by 300 ms says so: the figure is measured, not a constant."""
    from backend.tenancy import login_limits

    monkeypatch.setattr(get_settings(), "server_timing", True)
    await _answers(demo_db)  # what a process does once (imports, the hasher's first use) is not compared
    quick, _ = await _answers(demo_db)
    verify = login_limits._verify

    def slow(*args, **kwargs):
        time.sleep(0.3)  # in the password check's worker thread
        return verify(*args, **kwargs)

    monkeypatch.setattr(login_limits, "_verify", slow)
    slowed, _ = await _answers(demo_db)
    took, before = app_ms(slowed.headers[HEADER]), app_ms(quick.headers[HEADER])
    assert took >= 300 and took - before >= 150, (quick.headers, slowed.headers)  # room for the hash's jitter


@pytest.mark.parametrize(
    ("header", "ms"), [("app;dur=12.5", 12.5), ("app;dur=3, db;dur=1", 3.0), ("db;dur=1", None), ("", None)]
)
def test_an_answers_header_is_read_as_the_app_wrote_it(header: str, ms: float | None) -> None:
    assert app_ms(header) == ms
