"""The auditor: a role a company admin grants and takes away (audited). An auditor reads the company's audit
trail and the history of every run and flow, sees record and output contents only as their own permissions
allow, and decides nothing: every route of the app that is not a read refuses an auditor's session and
token (walked from the route table, with the controls: a member's walk is not refused as an auditor's, and
the walk notices a route that lets the auditor through), and the services refuse an auditor's context."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend.actions.tables import ActionItem
from backend.audit.tables import AuditEntry
from backend.records.datasets import DATASETS
from backend.records.visibility import visible_where
from backend.runs.tables import Run
from backend.tenancy.auth import ASSISTANT_SCOPE, AUDITOR_OK_KEY, SELF_AUTHENTICATED_KEY, TOKEN_SCOPES
from backend.tenancy.context import AUDITOR_REFUSED, load_user_context_by_email
from backend.tenancy.tables import ApiToken, PermissionSet, User, UserPermissionSet
from tests.support.audit import (
    ADMIN,
    AUDITOR,
    SECRET_EXCERPT,
    SECRET_STDOUT,
    SECRET_VALUE,
    _user_id,
    app_routes,
    concrete,
    make_auditor,
)
from tests.support.audit import _run as finished_run
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

ALICE = "alice@acme.example"

# The routes other than reads an auditor may call: they change nothing of the company's.
AUDITOR_ROUTES = {
    ("POST", "/api/auth/login"),
    ("POST", "/api/auth/sso/start"),  # signing in through the company's single sign-on
    ("POST", "/api/auth/sso/return"),
    ("POST", "/api/auth/logout"),
    ("POST", "/api/audit/verify"),
    ("POST", "/api/runs/{run_id:int}/reruns"),  # a re-run for evidence: actions discarded, nothing charged
    # their own credentials (issue 53, review D-L2): revoking a token of theirs, changing their password, and
    # the link and forgotten-password routes anyone may call; none changes anything of the company's
    ("DELETE", "/api/me/tokens/{token_id:int}"),
    ("DELETE", "/api/me/connections/{grant_id:int}"),  # disconnecting an OAuth assistant, as revoking a token
    ("POST", "/api/me/password"),
    ("POST", "/api/auth/forgot-password"),
    ("POST", "/api/auth/password-link"),
    ("POST", "/api/auth/set-password"),
    (
        "PUT",
        "/api/me/notifications",
    ),  # which of their own notices they get (issue 56): nothing of the company's
}


def decision_routes(app: Any) -> list[tuple[str, str]]:
    """What the walk covers: every route that is not a read, an AUDITOR_OK route or self-authenticated."""
    return sorted(
        (method, path)
        for method, path, opt in app_routes(app)
        if method != "GET" and not opt.get(AUDITOR_OK_KEY) and not opt.get(SELF_AUTHENTICATED_KEY)
    )


async def walk(
    client,
    routes: list[tuple[str, str]],
    headers: dict[str, str] | None = None,
    refusals: frozenset[str] = frozenset({AUDITOR_REFUSED}),
) -> list[Any]:
    """The routes that did NOT refuse the caller (403 with one of `refusals`): [(method, path, status, body)]."""
    through = []
    for method, path in routes:
        r = await client.request(method, concrete(path), json={}, headers=headers or {})
        body = (
            r.json()
            if r.headers.get("content-type", "").startswith(("application/json", "application/problem+json"))
            else {}
        )
        if not (r.status_code == 403 and isinstance(body, dict) and body.get("error") in refusals):
            through.append((method, path, r.status_code, body))
    return through


def test_the_routes_open_to_an_auditor_beyond_reads_are_these() -> None:
    opened = {(m, p) for m, p, opt in app_routes() if opt.get(AUDITOR_OK_KEY)}
    assert opened == AUDITOR_ROUTES


# who may call a route or a service, decided by the guard and the context's role, not an engine's (the auditor's
# reads of another company and of records, SQL, stay on both engines below; the last admin's count too)
@pytest.mark.sqlite
async def test_an_admin_makes_an_auditor_and_takes_it_away_audited(client) -> None:
    await login(client, ADMIN)
    people = (await client.get("/api/company/people")).json()
    assert {p["email"] for p in people} >= {ADMIN, AUDITOR, ALICE}
    assert all(p["email"].endswith("@acme.example") for p in people)
    frank = await _user_id(AUDITOR)
    r = await client.patch(f"/api/company/people/{frank}", json={"role": "auditor"})
    assert r.status_code == 200 and r.json()["role"] == "auditor"
    client.cookies.clear()
    assert (await login(client, AUDITOR))["user"]["role"] == "auditor"
    assert (await client.get("/api/audit")).status_code == 200  # the trail is theirs to read now
    client.cookies.clear()
    await login(client, ADMIN)
    r = await client.patch(f"/api/company/people/{frank}", json={"role": "member"})
    assert r.status_code == 200 and r.json()["role"] == "member"
    entries = (
        await AuditEntry.select()
        .where(AuditEntry.action == "user.role_changed")
        .order_by(AuditEntry.seq)
        .output(load_json=True)
    )
    assert [(e["data"]["from"], e["data"]["to"]) for e in entries] == [
        ("member", "auditor"),
        ("auditor", "member"),
    ]
    assert all(e["actor"] == ADMIN and e["data"]["auth"] == "session" for e in entries)
    assert all(e["subject_type"] == "user" and e["subject_id"] == str(frank) for e in entries)
    client.cookies.clear()
    await login(client, AUDITOR)  # taken away: the trail is closed again, at once
    assert (await client.get("/api/audit")).status_code == 403


async def test_only_an_admin_sets_roles_and_nobody_is_made_admin_here(client) -> None:
    frank, admin = await _user_id(AUDITOR), await _user_id(ADMIN)
    await login(client, ALICE)  # a member
    r = await client.patch(f"/api/company/people/{frank}", json={"role": "auditor"})
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert (await client.get("/api/company/people")).status_code == 403
    admin_token = await token_for(client, ADMIN)  # the admin's assistant
    r = await client.patch(f"/api/company/people/{frank}", json={"role": "auditor"}, headers=admin_token)
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    await login(client, ADMIN)
    # issue 53: an admin makes admins too, and the company keeps one: its last admin is not demoted
    r = await client.patch(f"/api/company/people/{admin}", json={"role": "member"})
    assert r.status_code == 409 and r.json()["error"] == "last_admin"
    assert (await client.patch(f"/api/company/people/{frank}", json={"role": "nobody"})).status_code in (
        400,
        422,
    )
    gina = await _user_id("gina@globex.example")
    assert (await client.patch(f"/api/company/people/{gina}", json={"role": "auditor"})).status_code == 404
    roles = {u["email"]: u["role"] for u in await User.select(User.email, User.role)}
    assert roles[AUDITOR] == "member" and roles[ADMIN] == "admin" and roles["gina@globex.example"] == "member"
    assert (await client.patch(f"/api/company/people/{frank}", json={"role": "admin"})).status_code == 200
    assert (await client.patch(f"/api/company/people/{frank}", json={"role": "member"})).status_code == 200


@pytest.mark.sqlite  # the guard's and the service's refusal, not an engine's (see the first mark)
async def test_an_auditor_cannot_make_themselves_admin(client) -> None:
    await make_auditor(client)
    frank = await _user_id(AUDITOR)
    await login(client, AUDITOR)
    for role in ("admin", "member", "auditor"):
        r = await client.patch(f"/api/company/people/{frank}", json={"role": role})
        assert r.status_code == 403 and r.json()["error"] == AUDITOR_REFUSED, r.text
    r = await client.patch("/api/company/settings", json={"plan": "business"})
    assert r.status_code == 403 and r.json()["error"] == AUDITOR_REFUSED
    assert (await client.get("/api/me")).json()["role"] == "auditor"
    assert (await User.select(User.role).where(User.id == frank).first())["role"] == "auditor"


@pytest.mark.sqlite  # the guard's and the service's refusal, not an engine's (see the first mark)
async def test_every_route_but_reads_refuses_an_auditor_walked_from_the_route_table(client) -> None:
    routes = decision_routes(client.app)
    assert len(routes) >= 15  # the walk covers the decision routes, not an empty list
    for known in (
        ("POST", "/api/runs/{run_id:int}/approve"),
        ("POST", "/api/runs/{run_id:int}/reject"),
        ("POST", "/api/flows/{flow_id:int}/approve"),
        ("POST", "/api/action-items/{item_id:int}/accept"),
        ("POST", "/api/runs"),
        ("POST", "/api/schedules"),
        ("DELETE", "/api/schedules/{schedule_id:int}"),
        ("PATCH", "/api/company/settings"),
        ("PATCH", "/api/company/people/{user_id:int}"),
        ("POST", "/api/me/tokens"),
    ):
        assert known in routes
    await enable_code()
    token = await token_for(client, AUDITOR)  # minted while a member; kept by the assistant
    await make_auditor(client)
    before_seq = (await AuditEntry.select(AuditEntry.seq).order_by(AuditEntry.seq, ascending=False).first())[
        "seq"
    ]
    # the role change revoked it (review D-L2) ...
    assert (await client.get("/api/me", headers=token)).status_code == 401
    # ... and were one to outlive that, the guard still refuses it: made valid again by hand for the walk
    await ApiToken.update({ApiToken.revoked: False}).where(ApiToken.user == await _user_id(AUDITOR))
    await login(client, AUDITOR)
    assert await walk(client, routes) == []  # the session: refused on every one
    client.cookies.clear()
    # the token minted before: refused on every one, as the assistant's where it is a person's decision, as
    # an auditor's where an assistant may act (proposing, revising, uploading)
    either = frozenset({AUDITOR_REFUSED, "person_required"})
    assert await walk(client, routes, headers=token, refusals=either) == []
    # the routes the token guard lets an assistant's token through (a route may name no scope: Drive's
    # person-only routes under its controller's assistant opt)
    opened = [
        (m, p)
        for m, p, opt in app_routes(client.app)
        if (m, p) in routes and ASSISTANT_SCOPE in opt.get(TOKEN_SCOPES, frozenset())
    ]
    assert ("POST", "/api/runs") in opened
    assert await walk(client, opened, headers=token) == []
    # refusals are on the record (one entry a minute per auditor, with a count: audit/throttle.py), and
    # nothing else happened: no entry but sign-ins and refusals since the walk began
    after = await AuditEntry.select().where(AuditEntry.seq > before_seq).output(load_json=True)
    refused = [e for e in after if e["action"] == "auth.auditor_refused"]
    assert refused and refused[0]["actor"] == AUDITOR and refused[0]["data"]["auth"] == "session"
    assert {e["action"] for e in after} <= {"auth.auditor_refused", "auth.person_required", "auth.login"}
    # controls: the walk notices a route that lets the auditor through (an AUDITOR_OK one, and a read) ...
    await login(client, AUDITOR)
    through = await walk(client, [("POST", "/api/audit/verify")])
    assert [(m, p, status) for m, p, status, _ in through] == [("POST", "/api/audit/verify", 200)]
    assert (await client.get("/api/audit")).status_code == 200
    assert (await client.get("/api/audit/export")).status_code == 200
    # ... and a member's walk over the same routes is never refused as an auditor's (the guard reads the role)
    client.cookies.clear()
    await login(client, "bob@acme.example")
    assert len(await walk(client, routes)) == len(routes)


@pytest.mark.sqlite  # the guard's and the service's refusal, not an engine's (see the first mark)
async def test_the_owner_decides_where_the_auditor_is_refused(client) -> None:
    await enable_code()
    await make_auditor(client)
    await login(client, ALICE)
    first = (await client.post("/api/runs", json=proposal())).json()
    second = (await client.post("/api/runs", json=proposal(conversation_id="conv-2"))).json()
    client.cookies.clear()
    await login(client, AUDITOR)
    seen = await client.get(f"/api/runs/{first['id']}")
    assert seen.status_code == 200 and seen.json()["can_decide"] is False  # reads it, cannot decide it
    hashes = {"code_sha256": first["code_sha256"], "bundle_sha256": first["bundle_sha256"]}
    r = await client.post(f"/api/runs/{first['id']}/approve", json=hashes)
    assert r.status_code == 403 and r.json()["error"] == AUDITOR_REFUSED
    r = await client.post(f"/api/runs/{second['id']}/reject", json={"reason": "no"})
    assert r.status_code == 403 and r.json()["error"] == AUDITOR_REFUSED
    statuses = {r["id"]: r["status"] for r in await Run.select(Run.id, Run.status)}
    assert statuses[first["id"]] == statuses[second["id"]] == "awaiting_approval"
    # positive control: the run's owner, signed in, decides the same runs on the same routes
    assert (await approve_as(client, ALICE, first)).json()["status"] == "queued"
    r = await client.post(f"/api/runs/{second['id']}/reject", json={"reason": "no"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"


@pytest.mark.sqlite  # the guard's and the service's refusal, not an engine's (see the first mark)
async def test_the_service_layer_refuses_an_auditors_context_too(demo_db) -> None:
    from backend.actions import service as actions
    from backend.errors import Forbidden
    from backend.runs import service as runs
    from backend.tenancy import service as tenancy

    await User.update({User.role: "auditor"}).where(User.email == AUDITOR)
    auditor = await load_user_context_by_email(
        AUDITOR
    )  # a person, by the operator's say: still decides nothing
    assert auditor.is_person and not auditor.decides
    for call in (
        runs.approve(auditor, 1, code_sha256="0" * 64, bundle_sha256="0" * 64),
        runs.reject(auditor, 1, None),
        actions.accept(auditor, 1),
        actions.reject(auditor, 1),
        tenancy.create_api_token(auditor, "x"),
        tenancy.update_company_settings(auditor, {"code_execution_enabled": True}),
        tenancy.set_role(auditor, auditor.user_id, "member"),
    ):
        with pytest.raises(Forbidden) as refused:
            await call
        assert refused.value.code == AUDITOR_REFUSED
    admin = await load_user_context_by_email(ADMIN)  # positive control
    assert (await tenancy.update_company_settings(admin, {"code_execution_enabled": True}))[
        "code_execution_enabled"
    ]
    assert (await tenancy.set_role(admin, auditor.user_id, "member"))["role"] == "member"
    await tenancy.revoke_api_token(auditor, 1)  # their own token, were it theirs: not refused (review D-L2)


async def test_an_auditor_reads_every_runs_history_but_not_its_contents(client) -> None:
    run = await finished_run(client)  # Alice's: printed output, a staged excerpt, an accepted change
    await make_auditor(client)
    await login(client, AUDITOR)
    listed = (await client.get("/api/runs")).json()
    assert run["id"] in [r["id"] for r in listed["items"]]  # every run of the company, not only their own
    detail = await client.get(f"/api/runs/{run['id']}")
    assert detail.status_code == 200, detail.text
    body = detail.json()
    assert body["code"] == "print('v2')" and body["plan"] and body["manifest"]
    assert body["approval"]["by"] == ALICE and body["withheld"]
    assert body["findings"][0]["severity"] == "high"  # the warning shown at approval, not its excerpt
    pack = await client.get(f"/api/runs/{run['id']}/evidence")
    # what the run made is its contents (D-L1): not its output's name or hash either; the requester's pack
    # lists them (tests/audit/test_evidence.py, tests/audit/test_withheld_names.py)
    assert pack.status_code == 200 and pack.json()["outputs"] == [] and pack.json()["outputs_withheld"]
    assert (await client.get(f"/api/runs/{run['id']}/evidence/html")).status_code == 200
    items = await client.get(f"/api/runs/{run['id']}/action-items")
    assert items.status_code == 200 and items.json()[0]["decided_by"] == ALICE
    trail = await client.get(f"/api/runs/{run['id']}/audit")
    assert trail.status_code == 200 and {"run.approved"} <= {e["action"] for e in trail.json()}
    browsed = await client.get("/api/audit", params={"action": "action.accepted"})
    assert browsed.json()[0]["data_withheld"] == ["changes"]
    for response in (detail, pack, items, trail, browsed):
        for secret in (SECRET_STDOUT, SECRET_VALUE, SECRET_EXCERPT):
            assert secret not in response.text
    # positive control: the requester sees what their run printed and the change they accepted
    client.cookies.clear()
    await login(client, ALICE)
    assert SECRET_STDOUT in (await client.get(f"/api/runs/{run['id']}")).text
    assert SECRET_VALUE in (await client.get(f"/api/runs/{run['id']}/action-items")).text


async def _deal_ids(email: str) -> tuple[int, int]:
    """A deal `email` may read, and one they may not, by the visibility function."""
    ctx = await load_user_context_by_email(email)
    table = DATASETS["deals"].table
    visible = {r["id"] for r in await table.select(table.id).where(visible_where(ctx, DATASETS["deals"]))}
    every = {r["id"] for r in await table.select(table.id).where(table.company == ctx.company_id)}
    return min(visible), min(every - visible)


async def test_an_auditor_sees_a_changes_values_only_when_they_may_read_the_record(client) -> None:
    run = await finished_run(client)
    readable, hidden = await _deal_ids(AUDITOR)
    acme = (await Run.select(Run.company).where(Run.id == run["id"]).first())["company"]
    for index, record_id in ((1, readable), (2, hidden)):
        await ActionItem(
            company=acme,
            run=run["id"],
            index=index,
            op="update",
            dataset="deals",
            record_id=record_id,
            changes={"stage": f"VALUE-{record_id}"},
            status="accepted",
            decided_by=ALICE,
        ).save()
    await make_auditor(client)
    await login(client, AUDITOR)
    items = {i["record_id"]: i for i in (await client.get(f"/api/runs/{run['id']}/action-items")).json()}
    assert (
        items[readable]["changes"] == {"stage": f"VALUE-{readable}"}
        and not items[readable]["values_withheld"]
    )
    assert items[hidden]["changes"] == {} and items[hidden]["values_withheld"]
    assert items[hidden]["decided_by"] == ALICE  # who decided it, always
    single = await client.get(f"/api/action-items/{items[hidden]['id']}")
    assert single.status_code == 200 and f"VALUE-{hidden}" not in single.text
    assert (await client.get(f"/api/records/deals/{hidden}")).status_code == 404  # the same rule


async def test_an_auditors_records_are_their_own_permissions(client) -> None:
    await make_auditor(client)
    await login(client, AUDITOR)
    refused = await client.get("/api/records/employees")
    assert refused.status_code == 403 and refused.json()["error"] == "dataset_forbidden"
    hr = await PermissionSet.select(PermissionSet.id).where(PermissionSet.name == "HR").first()
    await UserPermissionSet(
        user=await _user_id(AUDITOR), permission_set=hr["id"]
    ).save()  # the admin grants HR
    granted = await client.get("/api/records/employees", params={"page_size": 500})
    assert granted.status_code == 200, granted.text
    ctx = await load_user_context_by_email(AUDITOR)
    table = DATASETS["employees"].table
    expected = {
        r["id"] for r in await table.select(table.id).where(visible_where(ctx, DATASETS["employees"]))
    }
    body = granted.json()
    rows = body["items"] if isinstance(body, dict) else body
    assert expected and {r["id"] for r in rows} <= expected  # as any member with HR: the visibility function


async def test_an_auditor_of_acme_never_sees_globex(client) -> None:
    await enable_code("Globex")
    await login(client, "gina@globex.example")
    globex_run = await client.post("/api/runs", json=proposal())
    assert globex_run.status_code == 201, globex_run.text
    gid = globex_run.json()["id"]
    client.cookies.clear()
    await enable_code()
    await make_auditor(client)
    await login(client, AUDITOR)
    for url in (f"/api/runs/{gid}", f"/api/runs/{gid}/evidence", f"/api/runs/{gid}/audit"):
        assert (await client.get(url)).status_code == 404, url
    assert gid not in [r["id"] for r in (await client.get("/api/runs")).json()["items"]]
    acme = (await User.select(User.company).where(User.email == AUDITOR).first())["company"]
    entries = (await client.get("/api/audit", params={"limit": 1000})).json()
    assert entries and all(e["company_id"] == acme for e in entries)
    exported = (await client.get("/api/audit/export")).text.splitlines()
    lines = [json.loads(x) for x in exported[1:-1]]
    assert lines and all(line["company_id"] == acme for line in lines)
    assert "globex" not in (await client.get("/api/company/people")).text
    # positive control: Globex's own admin sees the run
    client.cookies.clear()
    await login(client, "admin@globex.example")
    assert (await client.get(f"/api/runs/{gid}")).status_code == 200


@pytest.mark.sqlite  # the rule's claim, not an engine's
async def test_an_auditors_export_holds_only_the_values_they_may_read_and_still_verifies(
    client, tmp_path
) -> None:
    """D-H1: the export gives an auditor the values of an entry only when the other views would (the
    record's visibility for a change, the run's own rule for its output); the others go out as their salted
    digest, and the file still verifies offline. The company admin's export holds every value."""
    from backend.audit import service as audit
    from tests.support.audit import _verifier_module, _verify

    run = await finished_run(client)
    readable, hidden = await _deal_ids(AUDITOR)
    employee = (await DATASETS["employees"].table.select(DATASETS["employees"].table.id).first())["id"]
    acme = (await Run.select(Run.company).where(Run.id == run["id"]).first())["company"]
    changes = {
        "readable": ("deals", readable, {"stage": "VALUE-READABLE-4411"}),
        "hidden": ("deals", hidden, {"stage": "VALUE-HIDDEN-DEAL-5522"}),
        "salary": ("employees", employee, {"salary": "SALARY-VALUE-987654"}),  # HR: the auditor has none
    }
    for index, (dataset, record_id, values) in enumerate(changes.values(), start=1):
        item = ActionItem(
            company=acme,
            run=run["id"],
            index=index,
            op="update",
            dataset=dataset,
            record_id=record_id,
            changes=values,
            status="accepted",
            decided_by=ALICE,
        )
        await item.save()
        await audit.record(  # as actions.service.accept records it
            "action.accepted",
            actor=ALICE,
            company_id=acme,
            subject_type="action_item",
            subject_id=item.id,
            data={
                "run_id": run["id"],
                "op": "update",
                "dataset": dataset,
                "record_id": record_id,
                "changes": values,
            },
        )
    await audit.record(
        "test.output",
        actor="system",
        company_id=acme,
        subject_type="run",
        subject_id=run["id"],
        data={"stdout": SECRET_STDOUT},
    )
    await make_auditor(client)
    await login(client, AUDITOR)
    response = await client.get("/api/audit/export")
    assert response.status_code == 200, response.text
    text = response.text
    for secret in ("VALUE-HIDDEN-DEAL-5522", "SALARY-VALUE-987654", SECRET_STDOUT, SECRET_VALUE):
        assert secret not in text, secret
    assert "VALUE-READABLE-4411" in text  # a record the auditor may read: its values, as in the items view
    lines = text.splitlines()
    result = _verify(tmp_path, lines)
    assert result.returncode == 0, result.stderr  # without the values, the file still verifies
    assert "values are withheld from you" in result.stdout
    assert json.loads(lines[0])["values"] == "readable"
    mine = {json.loads(x)["company_seq"]: json.loads(x) for x in lines[1:-1]}

    # positive control: the admin's export holds every value, and the digests the auditor got are theirs
    client.cookies.clear()
    await login(client, ADMIN)
    full_lines = (await client.get("/api/audit/export")).text.splitlines()
    assert "SALARY-VALUE-987654" in "\n".join(full_lines) and _verify(tmp_path, full_lines).returncode == 0
    full = {json.loads(x)["company_seq"]: json.loads(x) for x in full_lines[1:-1]}
    verifier = _verifier_module()
    withheld = [n for n, line in mine.items() if "data_withheld" in line]
    assert len(withheld) >= 4  # the hidden deal, the salary, the printed output, the finished run's change
    for n in withheld:
        line, complete = mine[n], full[n]
        assert "salt" not in line and line["data_withheld"] and line["hash"] == complete["hash"]
        assert line["data_digest"] == complete["data_digest"]
        assert line["data_digest"] == verifier.contents_digest(complete["salt"], complete["data"])
        # salted: the values alone do not give the digest (a guessed salary cannot be tested against it)
        contents = {k: v for k, v in complete["data"].items() if k in verifier.CONTENT_KEYS}
        assert line["data_digest"] != verifier.sha256(verifier.canonical(contents))
    # an edited digest is refused: the withheld line is still bound to its hash
    n = withheld[0]
    forged = [
        json.dumps({**json.loads(x), "data_digest": "0" * 64}) if json.loads(x).get("company_seq") == n else x
        for x in lines
    ]
    refused = _verify(tmp_path, forged)
    assert refused.returncode == 1 and "edited" in refused.stderr
