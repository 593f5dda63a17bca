"""A token refused on a person-only route cannot flood the audit trail: one entry per token a minute, whose
`count` says how many refusals it stands for. The first refusal is recorded at once (positive control).

The requests go through `httpx.ASGITransport`, which runs the app on the test's event loop, where the
counting (and its end-of-window timer) lives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from backend.audit import service as audit
from backend.audit import throttle
from backend.audit.tables import AuditEntry
from tests.support.http import console_origin

# the throttle's count and window, not an engine's (appends on PostgreSQL: test_audit_batching)
pytestmark = pytest.mark.sqlite

REFUSED = "auth.person_required"


@asynccontextmanager
async def api(demo_db: str) -> AsyncIterator[httpx.AsyncClient]:
    from backend.app import create_app

    app = create_app(database_url=demo_db, run_hooks=False, pool=False)
    transport = httpx.ASGITransport(app=app, client=("198.51.100.20", 40000))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver.local", headers={"origin": console_origin()}
    ) as client:
        yield client


async def _token(client: httpx.AsyncClient, email: str) -> tuple[dict[str, str], int]:
    """Minted in the person's session, which is then forgotten: the assistant holds only the token."""
    r = await client.post("/api/auth/login", json={"email": email, "password": "demo"})
    assert r.status_code == 200, r.text
    r = await client.post("/api/me/tokens", json={"name": "assistant"})
    assert r.status_code == 201, r.text
    client.cookies.clear()
    return {"Authorization": f"Bearer {r.json()['token']}"}, r.json()["id"]


async def _entries(token_id: int) -> list[dict[str, Any]]:
    return (
        await AuditEntry.select()
        .where((AuditEntry.action == REFUSED) & (AuditEntry.subject_id == str(token_id)))
        .order_by(AuditEntry.seq)
        .output(load_json=True)
    )


async def _refuse(client: httpx.AsyncClient, token: dict[str, str]) -> None:
    r = await client.post("/api/me/tokens", json={"name": "more"}, headers=token)
    assert r.status_code == 403 and r.json()["error"] == "person_required", r.text


async def test_a_token_looping_fifty_times_writes_two_entries_that_count_fifty(demo_db: str) -> None:
    async with api(demo_db) as client:
        token, token_id = await _token(client, "alice@acme.example")
        await _refuse(client, token)
        first = await _entries(token_id)
        # positive control: the first refusal is on the record at once, naming the token and the route
        assert len(first) == 1
        assert first[0]["data"]["count"] == 1 and first[0]["data"]["token_id"] == token_id
        assert first[0]["data"]["path"] == "/api/me/tokens" and first[0]["data"]["method"] == "POST"
        for _ in range(24):
            await _refuse(client, token)
        await asyncio.gather(*(_refuse(client, token) for _ in range(25)))  # and a parallel burst
        assert len(await _entries(token_id)) == 1  # the other 49 are counted, not written one by one
        await throttle.flush()  # what the app does on shutdown (or the minute's end does by itself)
    entries = await _entries(token_id)
    assert len(entries) == 2
    assert [e["data"]["count"] for e in entries] == [1, 49]
    assert sum(e["data"]["count"] for e in entries) == 50
    summary = entries[1]["data"]
    assert summary["repeated"] is True and summary["routes"] == ["POST /api/me/tokens"]
    assert entries[1]["actor"] == entries[0]["actor"] and entries[1]["company_id"] == entries[0]["company_id"]
    assert (await audit.verify()).ok  # the chain holds


async def test_the_end_of_the_window_records_the_count_by_itself(demo_db: str, monkeypatch) -> None:
    monkeypatch.setattr(throttle, "WINDOW_SECONDS", 2.0)  # outlasts the five requests below
    async with api(demo_db) as client:
        token, token_id = await _token(client, "alice@acme.example")
        for _ in range(4):
            await _refuse(client, token)
        r = await client.get("/api/audit", headers=token)  # another person-only route, same token
        assert r.status_code == 403
        assert len(await _entries(token_id)) == 1
        for _ in range(100):  # the window ends: its entry is written without any further request
            if len(await _entries(token_id)) == 2:
                break
            await asyncio.sleep(0.05)
        entries = await _entries(token_id)
        assert [e["data"]["count"] for e in entries] == [1, 4]
        assert entries[1]["data"]["routes"] == ["GET /api/audit", "POST /api/me/tokens"]
        await asyncio.sleep(2.1)
        await _refuse(client, token)  # a quiet token's next refusal is recorded at once again
        entries = await _entries(token_id)
        assert [e["data"]["count"] for e in entries] == [1, 4, 1]


async def test_each_token_has_its_own_count(demo_db: str) -> None:
    """One token's loop does not hide another token's refusal (the key is the token)."""
    async with api(demo_db) as client:
        alice, alice_id = await _token(client, "alice@acme.example")
        bob, bob_id = await _token(client, "bob@acme.example")
        for _ in range(10):
            await _refuse(client, alice)
        await _refuse(client, bob)
        assert [e["data"]["count"] for e in await _entries(bob_id)] == [1]
        assert [e["data"]["count"] for e in await _entries(alice_id)] == [1]
        await throttle.flush()
        assert [e["data"]["count"] for e in await _entries(alice_id)] == [1, 9]
        assert [e["data"]["count"] for e in await _entries(bob_id)] == [1]


async def test_without_the_window_every_refusal_is_written(demo_db: str, monkeypatch) -> None:
    """Positive control for the counting: with no window, the same loop writes one entry per refusal."""
    monkeypatch.setattr(throttle, "WINDOW_SECONDS", 0.0)
    async with api(demo_db) as client:
        token, token_id = await _token(client, "alice@acme.example")
        for _ in range(5):
            await _refuse(client, token)
        await throttle.flush()
    assert [e["data"]["count"] for e in await _entries(token_id)] == [1] * 5
