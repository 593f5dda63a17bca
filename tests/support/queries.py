"""Counting the SQL statements a block of code issues: the engine's one entry for every query
(`run_querystring`) is wrapped for the block, whichever engine and event loop runs it (the app's requests and
the test's own queries alike). Used to pin what one request of a hot route costs (tests/runs/test_route_queries.py,
tests/fleet/test_worker_queries.py, tests/flows/test_flow_queries.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from piccolo.engine.base import Engine

from backend import db
from backend.tenancy.tables import Company


def chain_locks(entries: int = 1) -> int:
    """What `entries` audit entries cost beyond their tail and insert: on PostgreSQL each transaction that
    appends takes the chain's lock first, one statement (backend/audit/service.py), so that the
    appends of several API processes take turns; SQLite has one writer and no such lock."""
    return entries if db.is_postgres() else 0


@contextlib.contextmanager
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every query any engine runs inside the block, as SQL text (the app's and the test's alike)."""
    seen: list[str] = []
    engine_type = type(Company._meta.db)
    real = engine_type.run_querystring

    async def counting(self: Engine, querystring: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(querystring))
        return await real(self, querystring, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(engine_type, "run_querystring", counting)
        yield seen
