"""`cleanroom serve --with-worker` enrolls its `local` host afresh at every start (issue 52, D-L9).

As whoever kept the token of an earlier start (an old process's environment, a log, a crash dump): after two
starts only the newest `local` token authenticates, and each revocation is audited. Control: a token of a
non-local host, enrolled before both starts, still authenticates; the newest local token does too. The
enrollment is `serve`'s own code path (`_local_worker`, its worker process not started), on the test's
database."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from backend.audit.tables import AuditEntry
from backend.cli import serve
from backend.errors import NotAuthenticated
from backend.fleet import service
from backend.settings import get_settings


def _start(monkeypatch: pytest.MonkeyPatch, url: str) -> str:
    """One `serve --with-worker` start: the token its local worker would be given."""
    given: list[dict[str, Any]] = []
    monkeypatch.setattr(serve.subprocess, "Popen", lambda command, env: given.append(env))
    settings = SimpleNamespace(workers="fleet", is_postgres=True, effective_api_base_url="http://api.test")
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        serve._local_worker(settings)
    finally:
        get_settings.cache_clear()
    return given[-1]["CLEANROOM_WORKER_TOKEN"]


async def test_only_the_newest_local_token_authenticates(demo_db: str, monkeypatch) -> None:
    other = await service.enroll("alpha", created_by="cli:test")  # a hypervisor host of the fleet
    first = await asyncio.to_thread(_start, monkeypatch, demo_db)
    assert await service.host_for_token(f"Bearer {first}") == "local"  # control: it worked until replaced
    second = await asyncio.to_thread(_start, monkeypatch, demo_db)
    assert second != first

    with pytest.raises(NotAuthenticated):  # the adversary: the earlier start's token
        await service.host_for_token(f"Bearer {first}")
    assert await service.host_for_token(f"Bearer {second}") == "local"
    assert await service.host_for_token(f"Bearer {other}") == "alpha"  # another host's token: untouched
    live = [(t["host_id"], t["revoked"]) for t in await service.tokens()]
    assert live == [("alpha", False), ("local", True), ("local", False)]
    revoked = await AuditEntry.select().where(AuditEntry.action == "worker.token_revoked")
    assert [(e["subject_id"], e["actor"]) for e in revoked] == [("local", "cleanroom serve --with-worker")]
