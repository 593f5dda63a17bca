"""The pool's connections go back without asyncpg's reset query (`backend/db.py`, `PooledConnection`): one round
trip per query saved. What that query did not need to do here is checked: a transaction left open is still
rolled back; session state would now outlive a request, so nothing outside the fleet queue's own connections
may set any."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
import pytest

from backend import db

pytestmark = pytest.mark.postgres

BACKEND = Path(__file__).resolve().parents[2] / "backend"
# what asyncpg's reset query undoes: session settings, LISTEN, session advisory locks, cursors WITH HOLD
# (a statement that starts a string literal: prose and an UPDATE's SET do not count)
SESSION_STATE = re.compile(r"""["'](SET\s+(SESSION\s+)?\w+|LISTEN\s|DECLARE\s)|pg_(try_)?advisory_lock\(""")
OWN_CONNECTIONS = {"fleet/queue.py"}  # psycopg connections of its own (leader lock, LISTEN), never the pool's


async def _one_connection_pool(url: str, connection_class: type[asyncpg.Connection]) -> asyncpg.Pool:
    return await asyncpg.create_pool(url, min_size=1, max_size=1, connection_class=connection_class)


async def test_a_connection_given_back_inside_a_transaction_comes_back_without_it(empty_db: str) -> None:
    pool = db.engine().pool
    assert pool is not None and pool._connection_class is db.PooledConnection  # the app's pool, as started
    async with pool.acquire() as conn:
        await conn.execute("CREATE TABLE pool_probe (x int)")
    async with pool.acquire() as conn:
        await conn.execute("BEGIN")
        await conn.execute("INSERT INTO pool_probe VALUES (1)")
        assert conn.is_in_transaction()
    # LIFO: the same connection again
    async with pool.acquire() as conn:
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT count(*) FROM pool_probe") == 0


async def test_the_pool_holds_as_many_connections_as_the_setting_says(empty_db: str, monkeypatch) -> None:
    """`db_pool_size` (20 by default: ten were all taken at once under the control-plane bench)."""
    from backend.settings import get_settings

    assert db.engine().pool.get_max_size() == get_settings().db_pool_size == 20  # the app's, as started
    await db.close_pool()
    monkeypatch.setattr(get_settings(), "db_pool_size", 3)
    await db.start_pool()
    assert db.engine().pool.get_max_size() == 3


@pytest.mark.parametrize("connection_class", [db.PooledConnection, asyncpg.Connection])
async def test_session_state_outlives_a_request_only_without_the_reset_query(
    empty_db: str, connection_class: type[asyncpg.Connection]
) -> None:
    """Why the static check below exists; asyncpg's own class is the control."""
    pool = await _one_connection_pool(empty_db, connection_class)
    try:
        async with pool.acquire() as conn:
            await conn.execute("SET application_name = 'left behind'")
        async with pool.acquire() as conn:
            name = await conn.fetchval("SHOW application_name")
    finally:
        await pool.close()
    assert (name == "left behind") is (connection_class is db.PooledConnection)


def test_no_code_sets_session_state_on_the_pools_connections() -> None:
    found = {
        str(path.relative_to(BACKEND))
        for path in BACKEND.rglob("*.py")
        if SESSION_STATE.search(path.read_text(encoding="utf-8"))
    }
    assert found - OWN_CONNECTIONS == set(), found
    assert found >= OWN_CONNECTIONS  # control: the pattern finds the leader lock and LISTEN where they are
