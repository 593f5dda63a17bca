"""Console tests: NiceGUI's simulated `user` against the real API (the Litestar app on a seeded database,
reached through `httpx.ASGITransport`), and real-browser tests against real servers (`-m browser`)."""

from __future__ import annotations

import gc
import logging
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from nicegui import app as nicegui_app
from nicegui import storage
from nicegui.testing.user import User
from nicegui.testing.user_simulation import user_simulation

from console import session
from console.api import ApiConfig
from tests.support.console import CONSOLE_APP, Assistant
from tests.support.databases import _shared_app

# What nicegui's own pytest plugin does at configure time: per-session storage, never the repo's .nicegui.
storage.Storage.path = Path(tempfile.mkdtemp(prefix="cleanroom-console-storage-"))
nicegui_app.storage = storage.Storage()


@pytest.fixture
def api_app(demo_db: str):
    # the process's shared app, as the `client` fixture's; reached through httpx.ASGITransport, which runs no
    # lifespan, its requests connect per query in the test's loop (no pool there)
    return _shared_app(demo_db)


@pytest.fixture
def assistant(api_app) -> Assistant:
    return Assistant(httpx.ASGITransport(app=api_app))


@pytest.fixture
async def user(api_app, caplog: pytest.LogCaptureFixture) -> AsyncIterator[User]:
    session.configure(ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app)))
    async with user_simulation(main_file=CONSOLE_APP) as simulated:
        yield simulated
    # NiceGUI's simulation has just collected garbage in full (it does at its start and end): what survived lives
    # on (the shared app, the modules' caches), so it leaves the collector's walk, and the next test's two full
    # collections walk only what that test makes (tests/conftest.py freezes what collection imported)
    gc.freeze()
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    if errors:
        pytest.fail("unexpected ERROR logs: " + "; ".join(r.getMessage() for r in errors), pytrace=False)
