"""The test databases: the PostgreSQL server's URL, per-test database names, their owner and sweeping, the argon2
profile the tests hash with, and one shared app per process (tests/conftest.py's fixtures use these)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from argon2 import PasswordHasher

from backend import db  # noqa: E402
from backend.settings import get_settings  # noqa: E402

POSTGRES_URL = os.environ.get("CLEANROOM_TEST_POSTGRES_URL")


CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)  # the "cheap" profile's parameters


def _with_db(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def _blocking(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine to its end from sync code, also where an event loop already runs (a database
    fixture requested from an async fixture): then in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


async def _admin_sql(*statements: str) -> list[Any]:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        return [await conn.fetch(sql) for sql in statements]
    finally:
        await conn.close()


def _owner(pid: int | None = None) -> str:
    """This process (or `pid`) in a database name (pid and start time, so a reused pid does not match)."""
    from backend.sandbox.libvirt_conn import owner_token

    return owner_token(pid).replace(":", "_")


# t_<pid>_<start>_<hex> (a test's), tpl_<kind>_<pid>_<start>_<hex> (a process's templates)
_OWNED_NAME = re.compile(r"^(?:t|tpl_seeded|tpl_empty)_(\d+)_(\d+)_[0-9a-f]+$")


def _sweep_leftover_databases() -> list[str]:
    """Drop the PostgreSQL databases of test processes that are gone (a killed run leaves its templates
    and its test's database): two checkouts running the suite at once never touch each other's."""
    from backend.sandbox.libvirt_conn import owner_alive

    (rows,) = _blocking(lambda: _admin_sql("SELECT datname FROM pg_database"))
    gone = [
        r["datname"]
        for r in rows
        if (m := _OWNED_NAME.match(r["datname"])) and not owner_alive(f"{m[1]}:{m[2]}")
    ]
    if gone:
        _blocking(lambda: _admin_sql(*(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)' for n in gone)))
    return gone


_APPS: dict[tuple[object, ...], Any] = {}


def _shared_app(database_url: str) -> Any:
    """One app per process for the `client` fixture, built again only when a setting it reads at construction
    differs (fleet mode, the body limit, the allowed host names): Litestar registering the API's handlers took
    a fifth of the spread tests' own CPU. The app reads its database at request time (`db.configure`) and
    starts its pool, schema and MCP session manager in each client's lifespan; its state is emptied, so a test
    starts as with an app of its own (`tests/harness/test_shared_app.py`)."""
    from backend.app import create_app, fleet
    from backend.tenancy.origin import allowed_hosts

    settings = get_settings()
    key = (fleet(), settings.max_upload_bytes, tuple(sorted(allowed_hosts(settings))))
    app = _APPS.get(key)
    if app is None:
        app = _APPS[key] = create_app(database_url=database_url, run_hooks=False)
    else:
        db.configure(database_url)
    for name in list(app.state.keys()):
        del app.state[name]
    return app
