"""The `client` fixture's app is built once per process (tests/conftest.py, `_shared_app`). A test must still
meet it as if it were its own: the database of this test, no state left by the one before, and a new app where a
setting read at construction differs."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from backend.settings import get_settings
from tests.support.databases import _shared_app
from tests.support.http import console_origin

pytestmark = pytest.mark.sqlite


async def test_the_shared_app_serves_each_tests_own_database_and_forgets_its_state(
    _factories: dict,
) -> None:
    seeded = _factories["sqlite"].fresh(seeded=True)
    empty = _factories["sqlite"].fresh(seeded=False)
    app = _shared_app(seeded)
    async with AsyncTestClient(app=app) as c:
        c.headers["origin"] = console_origin()
        signed_in = await c.post("/api/auth/login", json={"email": "maria@acme.example", "password": "demo"})
        assert signed_in.status_code == 200, signed_in.text  # control: the demo people are in this database
    app.state.left_behind = "by the test before"

    again = _shared_app(empty)
    assert again is app  # shared: the point of it
    assert "left_behind" not in again.state
    async with AsyncTestClient(app=again) as c:
        c.headers["origin"] = console_origin()
        refused = await c.post("/api/auth/login", json={"email": "maria@acme.example", "password": "demo"})
        assert refused.status_code == 401, refused.text  # the next test's database has nobody in it


def test_a_setting_read_at_construction_builds_another_app(
    _factories: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _factories["sqlite"].fresh(seeded=False)
    first = _shared_app(url)
    assert _shared_app(url) is first
    monkeypatch.setenv("CLEANROOM_MAX_UPLOAD_BYTES", str(get_settings().max_upload_bytes + 1))
    get_settings.cache_clear()
    try:
        other = _shared_app(url)
        assert other is not first
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert _shared_app(url) is first
