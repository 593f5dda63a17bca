"""A person decides: the assistant's token may propose, never approve, accept, schedule, mint tokens or
change settings. Every refusal below is written as the assistant would try it (only its token), and is
paired with the positive control: the same user, signed in, succeeds."""

from __future__ import annotations

from typing import Any

import pytest

from backend.actions import service as actions
from backend.audit.tables import AuditEntry
from backend.runs.tables import Run
from backend.tenancy.auth import ASSISTANT_SCOPE, TOKEN_SCOPES
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company
from tests.support.http import ALICE, _enable, _refused, _token, approve_as, login

pytestmark = pytest.mark.sqlite  # who may call a route (the guard and the service's context), not an engine's

ADMIN = "admin@acme.example"

# Everything a token may call. Any route not listed here must refuse a token (person_required): a new
# endpoint is a person's unless someone decides otherwise here and in its handler.
ASSISTANT_ROUTES = {
    ("GET", "/api/health"),
    ("GET", "/api/me"),
    ("GET", "/api/company/settings"),
    ("GET", "/api/records"),
    ("GET", "/api/records/{dataset:str}"),
    ("GET", "/api/records/{dataset:str}/{record_id:int}"),
    ("GET", "/api/drive/folders"),
    ("POST", "/api/drive/folders"),
    ("GET", "/api/drive/files"),
    ("POST", "/api/drive/files"),
    ("GET", "/api/drive/files/{file_id:int}"),
    ("GET", "/api/drive/files/{file_id:int}/content"),
    ("GET", "/api/drive/trash"),  # reads (issue 54); deleting, restoring, purging, sharing are a person's
    ("GET", "/api/drive/quota"),
    ("POST", "/api/runs"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/{run_id:int}"),
    (
        "GET",
        "/api/runs/stats",
    ),  # the runs page's charts over the runs the list shows the same caller (issue 56)
    ("POST", "/api/runs/{run_id:int}/revisions"),
    ("GET", "/api/runs/{run_id:int}/action-items"),
    ("GET", "/api/runs/{run_id:int}/audit"),
    ("POST", "/api/flows"),
    ("GET", "/api/flows"),
    ("GET", "/api/flows/{flow_id:int}"),
    ("GET", "/api/flows/{flow_id:int}/audit"),
    ("GET", "/api/action-items/{item_id:int}"),
    ("GET", "/api/credits"),
    ("GET", "/api/schedules"),
    ("GET", "/api/system/health"),
    ("GET", "/api/system/queue-history"),  # the health page's queue depth, the caller's company's (issue 56)
    ("GET", "/api/sandbox/environment"),  # the guest's package versions, to write code for (issue 57)
}


def _proposal(**extra: Any) -> dict[str, Any]:
    return {
        "conversation_id": "c-42",
        "title": "Largest open deal",
        "plan": "Find the largest open deal.",
        "code": "print('hello')\n",
        "datasets": ["deals"],
        **extra,
    }


def test_every_route_not_opened_to_the_assistant_is_person_only() -> None:
    """The scope is an allow-list on the handlers: this lists every route of the app and compares."""
    from backend.app import create_app

    app = create_app(run_hooks=False, pool=False)
    opened = set()
    for route in app.routes:
        for method, handler in getattr(route, "route_handler_map", {}).items():
            if method == "OPTIONS" or route.path.startswith("/schema"):
                continue
            scopes = (
                handler[0].opt.get(TOKEN_SCOPES, frozenset()) if isinstance(handler, tuple) else frozenset()
            )
            if ASSISTANT_SCOPE in scopes:
                opened.add((method, route.path))
    assert opened == ASSISTANT_ROUTES


async def test_the_walkthrough_with_only_the_token_stops_at_approve(client) -> None:
    await _enable()
    token, token_id = await _token(client, ALICE)
    run = (await client.post("/api/runs", json=_proposal(), headers=token)).json()
    assert run["status"] == "awaiting_approval" and run["can_decide"] is False  # the token is told, too
    hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
    r = await client.post(f"/api/runs/{run['id']}/approve", json=hashes, headers=token)
    await _refused(r, token_id)
    assert (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"] == "awaiting_approval"
    # positive control: the same person, signed in, with the hashes on the screen
    r = await approve_as(client, ALICE, run)
    assert r.status_code == 200 and r.json()["status"] == "queued"
    approved = (
        await AuditEntry.select().where(AuditEntry.action == "run.approved").output(load_json=True).first()
    )
    assert approved["actor"] == ALICE
    assert approved["data"]["auth"] == "session" and approved["data"]["session_id"]
    client.cookies.clear()
    after = (await client.get(f"/api/runs/{run['id']}", headers=token)).json()  # the token reads the result
    assert after["approval"]["by"] == ALICE


async def test_runs_approve_and_reject_are_person_only(client) -> None:
    await _enable()
    token, token_id = await _token(client, ALICE)
    run = (await client.post("/api/runs", json=_proposal(), headers=token)).json()
    await _refused(await client.post(f"/api/runs/{run['id']}/reject", json={}, headers=token), token_id)
    await login(client, ALICE)
    r = await client.post(f"/api/runs/{run['id']}/reject", json={"reason": "not now"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    entry = (
        await AuditEntry.select().where(AuditEntry.action == "run.rejected").output(load_json=True).first()
    )
    assert entry["data"]["auth"] == "session"


async def test_action_items_are_decided_by_a_person(client) -> None:
    await _enable()
    token, token_id = await _token(client, ALICE)
    run = (await client.post("/api/runs", json=_proposal(datasets=["tasks"]), headers=token)).json()
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    ctx = await load_user_context_by_email(ALICE)
    task = {"op": "create", "dataset": "tasks", "changes": {"title": "Call back", "status": "open"}}
    await actions.ingest(row, [task, task], ctx)
    items = (await client.get(f"/api/runs/{run['id']}/action-items", headers=token)).json()
    assert [i["status"] for i in items] == ["pending", "pending"]  # the token reads them
    for decision, item in (("accept", items[0]), ("reject", items[1])):
        await _refused(
            await client.post(f"/api/action-items/{item['id']}/{decision}", json={}, headers=token), token_id
        )
    listed = (await client.get(f"/api/runs/{run['id']}/action-items", headers=token)).json()
    assert [i["status"] for i in listed] == ["pending", "pending"]
    await login(client, ALICE)
    assert (await client.post(f"/api/action-items/{items[0]['id']}/accept")).json()["status"] == "accepted"
    assert (await client.post(f"/api/action-items/{items[1]['id']}/reject", json={})).json()[
        "status"
    ] == "rejected"


async def test_schedules_are_person_only(client) -> None:
    await _enable()
    token, token_id = await _token(client, ALICE)
    run = (await client.post("/api/runs", json=_proposal(), headers=token)).json()
    assert (await approve_as(client, ALICE, run)).status_code == 200
    await Run.update({Run.status: "succeeded"}).where(Run.id == run["id"])
    client.cookies.clear()
    body = {"run_id": run["id"], "cron": "0 7 * * 1"}
    await _refused(await client.post("/api/schedules", json=body, headers=token), token_id)
    await login(client, ALICE)
    created = await client.post("/api/schedules", json=body)
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    for method, url in (
        ("post", f"/api/schedules/{sid}/pause"),
        ("post", f"/api/schedules/{sid}/resume"),
        ("delete", f"/api/schedules/{sid}"),
    ):
        await _refused(await getattr(client, method)(url, headers=token), token_id)
    assert (await client.get("/api/schedules", headers=token)).json()[0]["status"] == "active"
    assert (await client.post(f"/api/schedules/{sid}/pause")).json()["status"] == "paused"
    assert (await client.post(f"/api/schedules/{sid}/resume")).json()["status"] == "active"
    assert (await client.delete(f"/api/schedules/{sid}")).status_code == 204


async def test_a_token_cannot_mint_list_or_revoke_tokens(client) -> None:
    from backend.tenancy.tables import ApiToken

    token, token_id = await _token(client, ALICE)
    before = await ApiToken.count()
    await _refused(await client.post("/api/me/tokens", json={"name": "more"}, headers=token), token_id)
    await _refused(await client.get("/api/me/tokens", headers=token), token_id)
    await _refused(await client.delete(f"/api/me/tokens/{token_id}", headers=token), token_id)
    assert await ApiToken.count() == before
    assert (await client.get("/api/me", headers=token)).status_code == 200  # still valid, still reading
    await login(client, ALICE)
    assert (await client.post("/api/me/tokens", json={"name": "second"})).status_code == 201
    assert (await client.delete(f"/api/me/tokens/{token_id}")).status_code == 204
    client.cookies.clear()
    assert (await client.get("/api/me", headers=token)).status_code == 401  # revoked by the person


@pytest.mark.parametrize(
    "change",
    [{"code_execution_enabled": True}, {"followup_without_reapproval": True}, {"credit_limit_per_day": 100}],
)
async def test_an_admins_token_cannot_change_company_settings(client, change: dict[str, Any]) -> None:
    token, token_id = await _token(client, ADMIN)
    before = await Company.select().where(Company.name == "Acme Analytics").first()
    await _refused(await client.patch("/api/company/settings", json=change, headers=token), token_id)
    assert await Company.select().where(Company.name == "Acme Analytics").first() == before
    assert (await client.get("/api/company/settings", headers=token)).status_code == 200  # reading is fine
    await login(client, ADMIN)
    r = await client.patch("/api/company/settings", json=change)
    assert r.status_code == 200 and all(r.json()[k] == v for k, v in change.items())


async def test_audit_verify_and_browsing_are_person_only(client) -> None:
    token, token_id = await _token(client, ADMIN)
    await _refused(await client.post("/api/audit/verify", headers=token), token_id)
    await _refused(await client.get("/api/audit", headers=token), token_id)
    await login(client, ADMIN)
    assert (await client.post("/api/audit/verify")).status_code == 200
    assert (await client.get("/api/audit")).status_code == 200


async def test_the_service_layer_refuses_a_token_context_too() -> None:
    """Defence in depth: even a caller that skipped the HTTP guard cannot decide with a token's context."""
    from backend.errors import Forbidden
    from backend.runs import service as runs
    from backend.tenancy import service as tenancy
    from backend.tenancy.context import TOKEN, load_user_context

    person = await load_user_context_by_email(ADMIN)
    as_token = await load_user_context(person.user_id, auth=TOKEN, token_id=1, token_scope=ASSISTANT_SCOPE)
    for call in (
        runs.approve(as_token, 1, code_sha256="0" * 64, bundle_sha256="0" * 64),
        runs.reject(as_token, 1, None),
        actions.accept(as_token, 1),
        actions.reject(as_token, 1),
        tenancy.create_api_token(as_token, "x"),
        tenancy.revoke_api_token(as_token, 1),
        tenancy.update_company_settings(as_token, {"code_execution_enabled": True}),
    ):
        with pytest.raises(Forbidden) as refused:
            await call
        assert refused.value.code == "person_required"
    changed = await tenancy.update_company_settings(person, {"code_execution_enabled": True})
    assert changed["code_execution_enabled"] is True  # positive control: the operator/person context


test_the_service_layer_refuses_a_token_context_too = pytest.mark.usefixtures("demo_db")(
    test_the_service_layer_refuses_a_token_context_too
)
