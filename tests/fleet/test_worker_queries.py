"""How many SQL statements a fleet host's hot requests cost (issue 30): the heartbeat every host sends every
5 s, and the claim of a run dispatched to it. Counted through the engine's one entry for every query
(tests/queries.py), the worker token's check included, and pinned; the control shows the counter sees a
query added to the route."""

from __future__ import annotations

import pytest

from backend.fleet import service
from backend.tenancy.tables import Company
from tests.fleet.test_worker_api import _dispatch, _queued_run, _worker
from tests.queries import counted

pytestmark = pytest.mark.postgres

HEARTBEAT = 3  # the worker token; the host's row updated; the runs it holds by the database (to settle)
CLAIM = 3  # the worker token; the run queued → running for it while its host is not lost; its job


def _said(queries: list[str]) -> str:
    return "\n".join(q.strip().replace("\n", " ")[:160] for q in queries)


async def test_a_heartbeat_and_a_claim_cost_what_is_pinned(client, alice, acme_on, monkeypatch) -> None:
    run = await _queued_run(client, alice)
    worker = await _worker(client, "alpha")  # registering wrote the token's last_used_at: not counted below
    assert await _dispatch() == [run["id"]]
    with counted(monkeypatch) as queries:
        r = await client.post(
            "/api/worker/heartbeat", json={"running": 0, "draining": False, "holding": []}, headers=worker
        )
    assert r.status_code == 200, r.text
    assert len(queries) == HEARTBEAT, _said(queries)
    with counted(monkeypatch) as queries:
        r = await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)
    assert r.status_code == 200, r.text
    assert len(queries) == CLAIM, _said(queries)


async def test_control_the_count_sees_a_query_added_to_the_heartbeat(client, alice, acme_on, monkeypatch) -> None:
    worker = await _worker(client, "alpha")
    real = service.heartbeat

    async def one_more(*args, **kwargs):
        await Company.count()
        return await real(*args, **kwargs)

    with counted(monkeypatch) as queries:
        monkeypatch.setattr(service, "heartbeat", one_more)
        r = await client.post(
            "/api/worker/heartbeat", json={"running": 0, "draining": False, "holding": []}, headers=worker
        )
    assert r.status_code == 200, r.text
    assert len(queries) == HEARTBEAT + 1, _said(queries)
