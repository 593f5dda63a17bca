"""Meeting two requests inside the database: a second client, and waiting until one blocks on the other's lock."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import psycopg


@contextlib.asynccontextmanager
async def concurrent_client(client) -> AsyncIterator[httpx.AsyncClient]:
    """The same app, signed in the same way, over httpx's ASGI transport in this event loop, so that
    gathered requests really interleave (the Litestar test client runs them one after another)."""
    transport = httpx.ASGITransport(app=client.app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url=str(client.base_url),
        headers=dict(client.headers),
        cookies=client.cookies,
    ) as concurrent:
        yield concurrent


def meet_after(monkeypatch, owner: Any, name: str, parties: int) -> None:
    """Make `parties` concurrent calls of owner.name all return before any caller goes on: the widest
    window for a race between a check and the write that follows it."""
    original: Callable[..., Awaitable[Any]] = getattr(owner, name)
    barrier = asyncio.Barrier(parties)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        await asyncio.wait_for(barrier.wait(), timeout=120)
        return result

    monkeypatch.setattr(owner, name, wrapped)


LOCK_WAITERS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
)


def _meet_or_see_blocked(arrived: list[int], dsn: str) -> None:
    """After its room check, each upload waits until the other has checked too (two guards that do not
    exclude each other: both go on to insert), or until the database shows the other waiting on a lock (a
    guard that does): the widest window, whichever the guard, and no time guessed."""
    arrived.append(1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(6000):  # a minute at most
            if len(arrived) >= 2 or conn.execute(LOCK_WAITERS).fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the other upload neither checked its room nor waited on a lock")
