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
    """A handler made slower by a second says so: the figure is measured, not a constant. Bounded on both sides
    by what is certain under any load: at least the second slept inside the handler, at most the wall time the
    client saw for that request; and a second above the unslowed request's own figure, less a margin that a
    busy machine's jitter on one request does not use up (it once took 390 ms on a loaded CI machine, when the
    slowdown was 300 ms and the margin 150: the test measured the machine, not the header)."""
    from backend.tenancy import login_limits

    monkeypatch.setattr(get_settings(), "server_timing", True)
    await _answers(demo_db)  # what a process does once (imports, the hasher's first use) is not compared
    started = time.perf_counter()
    quick, _ = await _answers(demo_db)
    quick_wall = (time.perf_counter() - started) * 1000
    verify = login_limits._verify

    def slow(*args, **kwargs):
        time.sleep(1.0)  # in the password check's worker thread
        return verify(*args, **kwargs)

    monkeypatch.setattr(login_limits, "_verify", slow)
    started = time.perf_counter()
    slowed, _ = await _answers(demo_db)
    slowed_wall = (time.perf_counter() - started) * 1000
    took, before = app_ms(slowed.headers[HEADER]), app_ms(quick.headers[HEADER])
    assert took is not None and before is not None
    assert 1000 <= took <= slowed_wall and before <= quick_wall, (quick.headers, slowed.headers)
    assert took - before >= 500, (quick.headers, slowed.headers)


@pytest.mark.parametrize(
    ("header", "ms"), [("app;dur=12.5", 12.5), ("app;dur=3, db;dur=1", 3.0), ("db;dur=1", None), ("", None)]
)
def test_an_answers_header_is_read_as_the_app_wrote_it(header: str, ms: float | None) -> None:
    assert app_ms(header) == ms
