"""How many SQL statements one request of the hot routes costs (issue 30): the run detail an assistant polls,
a proposal, a held wait, as the assistant's token and as a signed-in person. Counted deterministically through
the engine's one entry for every query (tests/support/queries.py), authentication included, and pinned: a change that
adds a query to one of these routes fails here and says which statements it saw. The control below shows
the counter sees one query more when the route makes one.

Before (main at 9153e6f, SQLite and PostgreSQL alike): detail 20, proposal 35, wait answered at once 21,
approval 13 (SQLite; PostgreSQL locks the company row first: one more, before and after). Before the balance
was read once a request and a run made in one statement (main at fb1db7d): proposal 17, revision 21, flow
proposal (two steps) 30.
The caller's context was five queries (token, user, teams, permission sets, their grants), the company's
row was read two or three times, the credit balance five queries and twice, the staged-data limits eight."""

from __future__ import annotations

import pytest

from backend import db
from backend.runs import read
from backend.runs.tables import Run, RunStatus
from backend.tenancy.tables import Company
from tests.support.flows import flow_body, step
from tests.support.http import login
from tests.support.queries import chain_locks, counted
from tests.support.runs import proposal

pytestmark = pytest.mark.usefixtures("acme_on")

# the caller's context: the token (or session) with its person and their company, then teams and grants.
# Each audit entry below costs one statement more on PostgreSQL, the chain's lock (`chain_locks`).
AUTH = 2
DETAIL = AUTH + 3  # the run; the credit pool and what was used; what approved runs hold
PROPOSAL = 11
WAIT_ANSWERED_AT_ONCE = DETAIL
WAIT_HELD = AUTH + 1 + 4  # the run; after the wait: the run, the company (read again), the balance (2)
# context 2, the run, the reservation (balance 2; the admin's limits are on the company's row read with the
# caller; on PostgreSQL the company's row locked first: one more), the decision, the audit entry 2 (3 on
# PostgreSQL: `chain_locks`), the run again
APPROVE = 9
# context 2, the run, its latest attempt, balance 2 (the gate; the answer's approval cost shows the same),
# bounds 1, staged limits 2 (read once, before staging; the check after it uses the same figures), the deals
# export 1 (its rows and their count in one statement), the run 1, the audit entry 2, the previous attempt's code
REVISION = 14
# context 2, balance 2 (the gate; the page's approval gate shows the same), bounds 1, staged limits 2 per
# step, the deals export 1 per step, the flow, its runs (one INSERT each), its hash, the audit entry 2, the
# page 3
FLOW_PROPOSAL = 20
WATCH = '"run"."status" AS "status" FROM "run" WHERE "run"."id" IN'  # the shared status query a tick


def _said(queries: list[str]) -> str:
    return "\n".join(q.strip().replace("\n", " ")[:160] for q in queries)


async def _waiting_run(client, alice) -> int:
    response = await client.post("/api/runs", json=proposal(), headers=alice)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def test_a_run_detail_costs_five_queries_to_the_token_and_to_a_session(
    client, alice, monkeypatch
) -> None:
    run_id = await _waiting_run(client, alice)
    with counted(monkeypatch) as queries:
        r = await client.get(f"/api/runs/{run_id}", headers=alice)
    assert r.status_code == 200, r.text
    assert r.json()["approval_cost"] is not None and r.json()["requested_by"]["email"] == "alice@acme.example"
    assert len(queries) == DETAIL, _said(queries)
    await login(client, "alice@acme.example")
    with counted(monkeypatch) as queries:
        r = await client.get(f"/api/runs/{run_id}")
    assert r.status_code == 200, r.text
    assert len(queries) == DETAIL, _said(queries)


async def test_a_proposal_costs_eleven_queries(client, alice, monkeypatch) -> None:
    await _waiting_run(client, alice)  # the token's last_used_at written: not counted below
    with counted(monkeypatch) as queries:
        r = await client.post("/api/runs", json=proposal(conversation_id="c2"), headers=alice)
    assert r.status_code == 201, r.text
    # context 2, balance 2 (the gate; the answer's approval cost shows the same), bounds 1, staged limits
    # 2 (read once: the check after staging uses the same figures), the deals export 1, the run 1 (its own
    # root in the INSERT), the audit entry 2
    assert len(queries) == PROPOSAL + chain_locks(), _said(queries)


async def test_a_wait_costs_the_detail_and_one_more_read_of_the_run(client, alice, monkeypatch) -> None:
    run_id = await _waiting_run(client, alice)
    await client.get(f"/api/runs/{run_id}", headers=alice)
    with counted(monkeypatch) as queries:  # the status differs from the one seen already: answered at once
        r = await client.get(
            f"/api/runs/{run_id}", params={"wait_seconds": 5, "seen_status": "queued"}, headers=alice
        )
    assert r.status_code == 200 and r.json()["status"] == "awaiting_approval", r.text
    assert len(queries) == WAIT_ANSWERED_AT_ONCE, _said(queries)
    with counted(monkeypatch) as queries:  # nothing moves: answered when the second is up
        r = await client.get(f"/api/runs/{run_id}", params={"wait_seconds": 1}, headers=alice)
    assert r.status_code == 200, r.text
    own = [q for q in queries if WATCH not in q]
    assert len(queries) > len(own)  # the watch read the status meanwhile (shared by every waiter)
    assert len(own) == WAIT_HELD, _said(own)


async def test_an_approval_costs_nine_queries_ten_on_postgresql(client, alice, monkeypatch) -> None:
    run_id = await _waiting_run(client, alice)
    await login(client, "alice@acme.example")
    run = (await client.get(f"/api/runs/{run_id}")).json()  # the session's first request: not counted
    hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
    with counted(monkeypatch) as queries:
        r = await client.post(f"/api/runs/{run_id}/approve", json=hashes)
    assert r.status_code == 200 and r.json()["status"] == "queued", r.text
    assert len(queries) == APPROVE + (1 if db.is_postgres() else 0) + chain_locks(), _said(queries)


async def test_a_revision_costs_what_is_pinned(client, alice, monkeypatch) -> None:
    run_id = await _waiting_run(client, alice)
    await Run.update({Run.status: RunStatus.failed}).where(Run.id == run_id)
    with counted(monkeypatch) as queries:
        r = await client.post(f"/api/runs/{run_id}/revisions", json={"code": "print(2)\n"}, headers=alice)
    assert r.status_code == 201 and r.json()["attempt"] == 2 and r.json()["approval_cost"] is not None, r.text
    assert len(queries) == REVISION + chain_locks(), _said(queries)


async def test_a_flow_proposal_costs_what_is_pinned(client, alice, monkeypatch) -> None:
    await _waiting_run(client, alice)  # the token's last_used_at written: not counted below
    with counted(monkeypatch) as queries:
        r = await client.post("/api/flows", json=flow_body(step(), step()), headers=alice)
    assert r.status_code == 201 and len(r.json()["steps"]) == 2, r.text
    assert r.json()["approve_blocked_reason"] is None
    assert len(queries) == FLOW_PROPOSAL + chain_locks(), _said(queries)


async def test_control_the_count_sees_a_query_added_to_the_route(client, alice, monkeypatch) -> None:
    """Positive control: the same detail with one more query inside the route counts one more."""
    run_id = await _waiting_run(client, alice)
    await client.get(f"/api/runs/{run_id}", headers=alice)
    real = read.get_run_row

    async def one_more(ctx, wanted):
        await Company.count()
        return await real(ctx, wanted)

    with counted(monkeypatch) as queries:
        monkeypatch.setattr(read, "get_run_row", one_more)
        r = await client.get(f"/api/runs/{run_id}", headers=alice)
    assert r.status_code == 200, r.text
    assert len(queries) == DETAIL + 1, _said(queries)
