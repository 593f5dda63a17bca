"""`GET /api/runs/{id}?wait_seconds=…`: a waiting client is answered when the run's status moves, and all the
waiters of a process cost one shared status query a tick (`runs.watch`), not a read of the whole run each.
MCP `get_run(wait_seconds)` waits this way (tests/mcp)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from backend.runs import watch
from tests.support.http import approve_as, token_for
from tests.support.runs import proposal

WAITERS = 20


async def _proposed(client, alice) -> dict:
    response = await client.post("/api/runs", json=proposal(), headers=alice)
    assert response.status_code == 201, response.text
    return response.json()


@asynccontextmanager
async def _concurrent(client) -> AsyncIterator[httpx.AsyncClient]:
    """The same app, called in this test's event loop: Litestar's test client hands each request to its own
    loop's thread and blocks until the answer, so twenty waits through it would run one after another."""
    transport = httpx.ASGITransport(app=client.app)
    async with httpx.AsyncClient(transport=transport, base_url=str(client.base_url)) as direct:
        yield direct


async def _until_all_wait(run_id: int, waiting: list[asyncio.Task]) -> None:
    """Until every waiter's request has reached the watch (on a loaded machine twenty requests can take
    seconds to get through their token checks; a fixed sleep let the approval overtake them)."""
    deadline = time.monotonic() + 60
    while len(watch.watch()._waiters.get(run_id, [])) < len(waiting):
        assert time.monotonic() < deadline, "the waiters never reached the watch"
        assert not any(task.done() for task in waiting), [t.result() for t in waiting if t.done()]
        await asyncio.sleep(0.05)


async def test_waiters_are_answered_when_the_status_moves_with_one_query_a_tick_for_all(
    client, alice, acme_on
) -> None:
    run = await _proposed(client, alice)
    status_watch = watch.watch()  # this loop's, where the waiters wait (ASGITransport in this loop)
    queries_before = status_watch.queries  # not the sum over loops: a closed loop's watch is dropped

    async def waiter(direct: httpx.AsyncClient) -> tuple[str, float]:
        began = time.monotonic()
        answer = await direct.get(f"/api/runs/{run['id']}", params={"wait_seconds": 20}, headers=alice)
        assert answer.status_code == 200, answer.text
        return answer.json()["status"], time.monotonic() - began

    async with _concurrent(client) as direct:
        waiting = [asyncio.create_task(waiter(direct)) for _ in range(WAITERS)]
        await _until_all_wait(run["id"], waiting)
        await asyncio.sleep(3 * watch.TICK_SECONDS)  # ticks pass with nothing moved
        assert not any(task.done() for task in waiting)  # nothing moved: they wait
        assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
        client.cookies.clear()
        answers = await asyncio.gather(*waiting)
    assert {status for status, _ in answers} == {"queued"}
    assert max(seconds for _, seconds in answers) < 15  # answered by the change, not by the 20 s limit
    assert watch.watch() is status_watch
    ticks = status_watch.queries - queries_before
    # one status query a tick for all twenty waiters; read per waiter it would be at least 20 a tick
    assert 1 <= ticks < WAITERS


@pytest.mark.sqlite  # the wait's limit, the app's (the shared status query on both engines: the test above)
async def test_a_wait_with_nothing_moving_ends_at_its_limit_with_the_run_as_it_is(
    client, alice, acme_on
) -> None:
    run = await _proposed(client, alice)
    began = time.monotonic()
    answer = await client.get(f"/api/runs/{run['id']}", params={"wait_seconds": 1}, headers=alice)
    assert answer.status_code == 200 and answer.json()["status"] == "awaiting_approval"
    assert time.monotonic() - began >= 1.0
    # a status the caller saw earlier than the one now: answered at once
    answer = await client.get(
        f"/api/runs/{run['id']}", params={"wait_seconds": 20, "seen_status": "queued"}, headers=alice
    )
    assert answer.status_code == 200 and answer.json()["status"] == "awaiting_approval"
    # a wait longer than the API holds one is refused (the caller asks again instead)
    too_long = await client.get(f"/api/runs/{run['id']}", params={"wait_seconds": 26}, headers=alice)
    assert too_long.status_code == 422


@pytest.mark.sqlite  # who may read the run, the app's, not an engine's
async def test_another_companys_caller_cannot_wait_on_a_run_it_may_not_see(client, alice, acme_on) -> None:
    run = await _proposed(client, alice)
    gus = await token_for(client, "admin@globex.example")
    began = time.monotonic()
    refused = await client.get(f"/api/runs/{run['id']}", params={"wait_seconds": 20}, headers=gus)
    assert refused.status_code == 404
    assert time.monotonic() - began < 10  # refused at once, not after holding a wait on another company's run
    # control: the run's own company waits and reads it
    seen = await client.get(f"/api/runs/{run['id']}", params={"wait_seconds": 1}, headers=alice)
    assert seen.status_code == 200 and seen.json()["id"] == run["id"]
