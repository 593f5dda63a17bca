"""A person decides flows too: the assistant's token may propose a flow and read it, never approve or reject
it, nor approve one of its steps' runs on its own. Every refusal is tried with only the token, and paired with
the positive control: the same user, signed in with a session, approves (no worker runs here: nothing starts)."""

from __future__ import annotations

import pytest

from backend.audit.tables import AuditEntry
from backend.flows.tables import Flow
from backend.runs.tables import Run
from backend.tenancy.auth import ASSISTANT_SCOPE, TOKEN_SCOPES
from tests.support.flows import approve_flow_as, flow_body, hashes, step
from tests.support.http import ALICE, _enable, _refused, _token, login

pytestmark = pytest.mark.sqlite  # who may call a route, not an engine's

# Of the flows routes, exactly these are the assistant's: proposing and reading. Deciding is a person's.
ASSISTANT_FLOW_ROUTES = {
    ("POST", "/api/flows"),
    ("GET", "/api/flows"),
    ("GET", "/api/flows/{flow_id:int}"),
    ("GET", "/api/flows/{flow_id:int}/audit"),
}


def test_only_proposing_and_reading_flows_are_opened_to_the_assistant() -> None:
    from backend.app import create_app

    app = create_app(run_hooks=False, pool=False)
    opened, served = set(), set()
    for route in app.routes:
        if not route.path.startswith("/api/flows"):
            continue
        for method, handler in getattr(route, "route_handler_map", {}).items():
            if method == "OPTIONS":
                continue
            served.add((method, route.path))
            scopes = (
                handler[0].opt.get(TOKEN_SCOPES, frozenset()) if isinstance(handler, tuple) else frozenset()
            )
            if ASSISTANT_SCOPE in scopes:
                opened.add((method, route.path))
    assert opened == ASSISTANT_FLOW_ROUTES
    # the control: the decisions are served, and are not among them
    assert {("POST", "/api/flows/{flow_id:int}/approve"), ("POST", "/api/flows/{flow_id:int}/reject")} <= (
        served - opened
    )


async def _statuses(flow_id: int) -> tuple[str, list[str]]:
    flow = await Flow.select(Flow.status).where(Flow.id == flow_id).first()
    steps = await Run.select(Run.status).where(Run.flow_id == flow_id).order_by(Run.flow_step)
    return flow["status"], [s["status"] for s in steps]


async def test_a_token_cannot_approve_a_flow_but_the_person_can(client) -> None:
    await _enable()
    token, token_id = await _token(client, ALICE)
    r = await client.post("/api/flows", json=flow_body(step(), step("print(2)", [])), headers=token)
    assert r.status_code == 201, r.text
    flow = r.json()
    assert flow["status"] == "awaiting_approval" and flow["can_decide"] is False  # the token is told, too
    # the exact hashes the approval screen would send: only who sends them is wrong
    await _refused(
        await client.post(f"/api/flows/{flow['id']}/approve", json=hashes(flow), headers=token), token_id
    )
    await _refused(await client.post(f"/api/flows/{flow['id']}/reject", json={}, headers=token), token_id)
    first = flow["steps"][0]["run"]
    step_hashes = {"code_sha256": first["code_sha256"], "bundle_sha256": first["bundle_sha256"]}
    await _refused(
        await client.post(f"/api/runs/{first['id']}/approve", json=step_hashes, headers=token), token_id
    )
    assert await _statuses(flow["id"]) == ("awaiting_approval", ["awaiting_approval", "awaiting_approval"])
    assert await AuditEntry.count().where(AuditEntry.action == "flow.approved") == 0

    # positive control: the same person, signed in, with every step's hashes on the screen
    r = await approve_flow_as(client, ALICE, flow)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "running" and r.json()["approval"]["by"] == ALICE
    assert await _statuses(flow["id"]) == ("running", ["queued", "waiting"])
    approved = (
        await AuditEntry.select().where(AuditEntry.action == "flow.approved").output(load_json=True).first()
    )
    assert approved["actor"] == ALICE
    assert approved["data"]["auth"] == "session" and approved["data"]["session_id"]
    client.cookies.clear()
    after = (await client.get(f"/api/flows/{flow['id']}", headers=token)).json()  # the token reads the result
    assert after["approval"]["by"] == ALICE and after["can_decide"] is False


async def test_a_token_cannot_reject_a_flow_but_the_person_can(client) -> None:
    await _enable()
    token, token_id = await _token(client, ALICE)
    flow = (await client.post("/api/flows", json=flow_body(step()), headers=token)).json()
    await _refused(
        await client.post(
            f"/api/flows/{flow['id']}/reject", json={"reason": "by the assistant"}, headers=token
        ),
        token_id,
    )
    assert await _statuses(flow["id"]) == ("awaiting_approval", ["awaiting_approval"])
    await login(client, ALICE)
    r = await client.post(f"/api/flows/{flow['id']}/reject", json={"reason": "not now"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert await _statuses(flow["id"]) == ("rejected", ["rejected"])
    entry = (
        await AuditEntry.select().where(AuditEntry.action == "flow.rejected").output(load_json=True).first()
    )
    assert entry["actor"] == ALICE and entry["data"]["auth"] == "session"
