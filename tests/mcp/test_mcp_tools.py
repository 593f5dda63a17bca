"""The MCP server over both transports (streamable HTTP at /mcp and stdio), with the SDK's own client against a
real API server: what the tools show, what they refuse, and that nothing here can decide for a person."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import httpx
import pytest

from backend.demo.seed import DEMO_RUN_CODE
from backend.sandbox.image import manifest
from tests.support.mcp import (
    ACME_ADMIN,
    BOB,
    GINA,
    MARIA,
    REPO,
    ApiServer,
    http_client,
    structured,
    text,
)

pytestmark = pytest.mark.slow  # a real API server, and a stdio subprocess per person (tests/mcp/conftest.py)

TOOLS = {
    "list_datasets",
    "list_drive_files",
    "search_drive",
    "upload_file",
    "propose_run",
    "revise_run",
    "ask_followup",
    "get_run",
    "propose_flow",
    "get_flow",
}
DECISION_WORDS = ("approve", "reject", "accept", "decide", "setting", "schedule", "token", "grant")


def _feedback_file_id(server: ApiServer) -> int:
    with server.session(MARIA) as maria:
        files = maria.get("/api/drive/files", params={"all": "true"}).json()
    return next(f["id"] for f in files if f["name"] == "Customer feedback.xlsx")


def _demo_run_id(server: ApiServer) -> int:
    """Maria's seeded run, waiting for her approval (nobody approves it in these tests)."""
    with server.session(MARIA) as maria:
        runs = maria.get("/api/runs", params={"status": "awaiting_approval"}).json()["items"]
    return next(r["id"] for r in runs if r["title"] == "Open pipeline by stage")


# a bare `initialize` request, as an MCP client opens a session
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


async def test_tools_are_listed_and_none_decides(connect) -> None:
    async with connect(BOB) as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        for tool in tools:
            assert not any(word in tool.name for word in DECISION_WORDS), tool.name
            assert tool.description and len(tool.description) > 60  # a model can follow it
            assert tool.output_schema, f"{tool.name} has no structured output"
            for name, prop in tool.input_schema.get("properties", {}).items():
                described = prop.get("description") or prop.get("$ref") or prop.get("anyOf")
                assert described, f"{tool.name}.{name} is not described"
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["cleanroom://runs/{run_id}/files/{name}"]
        contract = client.instructions or ""
        for needle in ("/work/input/", "/work/output/", "actions.json", "approval", "no network", "20 files"):
            assert needle in contract, needle
        # the versions the guest offers come from the built image's manifest (the lock where none is built)
        guest = manifest()
        assert f"Python {guest['python']}" in contract
        for name in guest["offered"]:
            assert f"{name} {guest['packages'][name]}" in contract, name
        assert {"pandas", "numpy", "seaborn", "scikit-learn", "statsmodels"} <= set(guest["offered"])


async def test_list_datasets_as_bob_omits_employees(connect, api_server: ApiServer) -> None:
    async with connect(BOB) as client:
        listing = structured(await client.call_tool("list_datasets", {}))
    names = {d["name"] for d in listing["datasets"]}
    assert "employees" not in names and {"deals", "tasks", "contacts"} <= names
    deals = next(d for d in listing["datasets"] if d["name"] == "deals")
    types = {c["name"]: c["type"] for c in deals["columns"]}
    assert types["id"] == "integer" and types["amount"] == "number" and types["close_date"] == "date"
    assert types["stage"] == "string" and types["owner_id"] == "integer" and types["created_at"] == "datetime"
    with api_server.session(BOB) as bob:  # the count is the records API's for bob
        total = bob.get("/api/records/deals", params={"page_size": 1}).json()["total"]
    assert deals["visible_rows"] == total and deals["export_truncated"] is False
    assert listing["export_row_cap"] == 5000


async def test_list_datasets_says_when_an_export_truncates(api_server: ApiServer) -> None:
    token, _ = api_server.token(ACME_ADMIN)
    async with http_client(api_server, token) as client:
        listing = structured(await client.call_tool("list_datasets", {}))
    tasks = next(d for d in listing["datasets"] if d["name"] == "tasks")
    assert tasks["visible_rows"] > 5000 and tasks["export_rows"] == 5000 and tasks["export_truncated"] is True


async def test_list_datasets_describes_a_company_defined_dataset(api_server: ApiServer) -> None:
    """Issue 54: a dataset the company defined is listed with its columns and kinds, its key and writable
    columns, to a reader holding it (the admin); a member without a grant is not shown it (control)."""
    claims = {
        "name": "mcp_claims",
        "label": "Claims",
        "columns": [
            {"name": "claim_no", "kind": "string"},
            {"name": "amount", "kind": "number"},
            {"name": "filed_on", "kind": "date"},
            {"name": "state", "kind": "string", "enum": ["open", "paid"]},
        ],
        "key_column": "claim_no",
        "writable": ["state"],
    }
    with api_server.session(ACME_ADMIN) as admin:
        r = admin.post("/api/datasets/", json=claims)
        assert r.status_code in (201, 409), (
            r.text
        )  # 409: defined by an earlier run of this test on this server
    token, _ = api_server.token(ACME_ADMIN)
    async with http_client(api_server, token) as client:
        listing = structured(await client.call_tool("list_datasets", {}))
    found = next(d for d in listing["datasets"] if d["name"] == "mcp_claims")
    types = {c["name"]: c["type"] for c in found["columns"]}
    assert types == {
        "id": "integer",
        "claim_no": "string",
        "amount": "number",
        "filed_on": "date",
        "state": "string",
        "owner_id": "integer",
        "team_id": "integer",
        "visibility": "string",
        "created_at": "datetime",
        "updated_at": "datetime",
        "version": "integer",
    }
    assert (
        found["origin"] == "company" and found["key_column"] == "claim_no" and found["writable"] == ["state"]
    )
    assert found["enums"] == {"state": ["open", "paid"]} and found["visible_rows"] == 0
    bob, _ = api_server.token(BOB)
    async with http_client(api_server, bob) as client:
        names = {d["name"] for d in structured(await client.call_tool("list_datasets", {}))["datasets"]}
    assert "mcp_claims" not in names and "deals" in names


async def test_drive_listing_and_search(connect) -> None:
    async with connect(MARIA) as client:
        listing = structured(await client.call_tool("list_drive_files", {}))
        found = structured(await client.call_tool("search_drive", {"query": "feedback"}))
        nothing = structured(await client.call_tool("search_drive", {"query": "no such file anywhere"}))
    feedback = next(f for f in listing["files"] if f["name"] == "Customer feedback.xlsx")
    assert feedback["folder"] == "Shared sales material" and feedback["size"] > 0 and feedback["type"]
    assert [f["name"] for f in found["files"]] == ["Customer feedback.xlsx"]
    assert nothing["files"] == [] and nothing["total"] == 0


async def test_propose_run_waits_for_a_person(connect, api_server: ApiServer) -> None:
    feedback = _feedback_file_id(api_server)
    async with connect(MARIA) as client:
        result = await client.call_tool(
            "propose_run",
            {
                "title": "Open pipeline by stage",
                "plan": "Sum open deals by stage, chart it, propose one probability change.",
                "code": DEMO_RUN_CODE,
                "datasets": ["deals"],
                "files": [feedback],
                "conversation_id": "mcp-test-propose",
            },
        )
        proposal = structured(result)
        run_id = proposal["run_id"]
        assert proposal["status"] == "awaiting_approval" and proposal["needs_approval"] is True
        assert proposal["console_url"] == f"{api_server.console_url}/runs/{run_id}"
        assert proposal["attempt_label"] == "attempt 1 of 3"
        assert proposal["conversation_id"] == "mcp-test-propose"
        paths = {s["path"] for s in proposal["manifest"]}
        assert "/work/input/datasets/deals.csv" in paths
        finding = next(f for f in proposal["findings"] if f["sheet"] == "Responses")
        assert finding["column"] == "Notes" and "ignore your previous instructions" in finding["excerpt"]
        assert finding["reason"]  # why it reads like an instruction, as the person is told
        assert proposal["console_url"] in text(result) and "warning" in text(result)
        assert f"({finding['reason']})" in text(result)  # a text-only client reads the reason too
        # still waiting when read back through the tool
        view = structured(await client.call_tool("get_run", {"run_id": run_id}))
        assert view["status"] == "awaiting_approval" and view["finished"] is False
    with api_server.session(MARIA) as maria:  # the person sees it on the approval screen
        detail = maria.get(f"/api/runs/{run_id}").json()
    assert detail["status"] == "awaiting_approval" and detail["can_decide"] is True
    assert detail["code"] == DEMO_RUN_CODE and detail["requested_by"]["email"] == MARIA


async def test_bad_input_comes_back_as_tool_errors(connect, api_server: ApiServer) -> None:
    maria_run = _demo_run_id(api_server)
    base = {"title": "t", "plan": "p", "datasets": ["deals"]}
    async with connect(BOB) as client:
        syntax = await client.call_tool("propose_run", {**base, "code": "x = 1\ny = (\n"})
        forbidden = await client.call_tool(
            "propose_run", {**base, "code": "print(1)", "datasets": ["employees"]}
        )
        too_big = await client.call_tool("propose_run", {**base, "code": "#" * 210_000})
        unknown = await client.call_tool("get_run", {"run_id": 987654})
        not_his = await client.call_tool("get_run", {"run_id": maria_run})
        revise_not_his = await client.call_tool("revise_run", {"run_id": maria_run, "code": "print(2)"})
        bad_wait = await client.call_tool("get_run", {"run_id": maria_run, "wait_seconds": 600})
    assert syntax.is_error and "line 2" in text(syntax) and "does not parse" in text(syntax)
    assert forbidden.is_error and "employees" in text(forbidden) and "Not readable" in text(forbidden)
    assert too_big.is_error and "210,000 bytes" in text(too_big) and "200,000" in text(too_big)
    assert unknown.is_error and "987654" in text(unknown)
    # another user's run gets the same answer as a run that does not exist
    assert not_his.is_error and f"no run {maria_run}" in text(not_his)
    assert revise_not_his.is_error and f"no run {maria_run}" in text(revise_not_his)
    assert bad_wait.is_error and "wait_seconds" in text(bad_wait)
    for result in (syntax, forbidden, too_big, unknown, not_his, revise_not_his, bad_wait):
        assert "Traceback" not in text(result) and 'File "' not in text(result)
        assert "Open pipeline" not in text(result)  # nothing of maria's run leaks


async def test_a_followup_outside_a_grant_waits_for_approval(connect) -> None:
    async with connect(MARIA) as client:
        first = structured(
            await client.call_tool(
                "propose_run", {"title": "first", "plan": "p", "code": "print(1)", "datasets": ["deals"]}
            )
        )
        follow = structured(
            await client.call_tool(
                "ask_followup",
                {"followup_of": first["run_id"], "title": "second", "plan": "p", "code": "print(2)"},
            )
        )
    assert follow["conversation_id"] == first["conversation_id"]  # the same conversation, taken from the run
    assert follow["status"] == "awaiting_approval" and follow["approved_without_review"] is False
    assert follow["followup_of"] == first["run_id"] and follow["followup_note"]


async def test_the_mcp_token_cannot_decide_but_the_person_can(api_server: ApiServer) -> None:
    token, token_id = api_server.token(MARIA)
    async with http_client(api_server, token) as client:
        run = structured(
            await client.call_tool(
                "propose_run", {"title": "decide me", "plan": "p", "code": "print(1)", "datasets": ["deals"]}
            )
        )
    bearer = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=api_server.api_url, headers=bearer, timeout=30) as assistant:
        detail = assistant.get(f"/api/runs/{run['run_id']}").json()
        hashes = {"code_sha256": detail["code_sha256"], "bundle_sha256": detail["bundle_sha256"]}
        for path, body in (
            (f"/api/runs/{run['run_id']}/approve", hashes),
            (f"/api/runs/{run['run_id']}/reject", {"reason": "by the assistant"}),
            ("/api/company/settings", None),
        ):
            r = (
                assistant.patch(path, json={"followup_without_reapproval": True})
                if body is None
                else assistant.post(path, json=body)
            )
            assert r.status_code == 403 and r.json()["error"] == "person_required", (path, r.text)
            assert r.json()["token_id"] == token_id
        assert assistant.get(f"/api/runs/{run['run_id']}").json()["status"] == "awaiting_approval"
    # positive control: the same person, signed in, decides (rejecting here: approving starts a VM)
    with api_server.session(MARIA) as maria:
        r = maria.post(f"/api/runs/{run['run_id']}/reject", json={"reason": "positive control"})
        assert r.status_code == 200 and r.json()["status"] == "rejected"
    async with http_client(api_server, token) as client:
        view = structured(await client.call_tool("get_run", {"run_id": run["run_id"]}))
    assert (
        view["status"] == "rejected" and view["finished"] and view["rejection_reason"] == "positive control"
    )


async def test_a_globex_token_reads_nothing_of_acme(connect, api_server: ApiServer) -> None:
    acme_run = _demo_run_id(api_server)
    async with connect(GINA) as client:
        results = [
            await client.call_tool("get_run", {"run_id": acme_run}),
            await client.call_tool("get_run", {"run_id": acme_run, "wait_seconds": 1}),
            await client.call_tool("revise_run", {"run_id": acme_run, "code": "print(1)"}),
            await client.call_tool(
                "ask_followup", {"followup_of": acme_run, "title": "t", "plan": "p", "code": "print(1)"}
            ),
        ]
        files = structured(await client.call_tool("list_drive_files", {"include_run_outputs": True}))
        search = structured(await client.call_tool("search_drive", {"query": "feedback"}))
        datasets = structured(await client.call_tool("list_datasets", {}))
        with pytest.raises(Exception) as refused:
            await client.read_resource(f"cleanroom://runs/{acme_run}/files/pipeline_by_stage.png")
    for result in results:
        assert result.is_error and "Open pipeline" not in text(result) and "maria" not in text(result)
    assert "Open pipeline" not in str(refused.value)
    assert not any("acme" in f["name"].lower() or "feedback" in f["name"].lower() for f in files["files"])
    assert search["files"] == []
    with api_server.session(GINA) as gina:  # Globex's own counts, not Acme's
        deals = gina.get("/api/records/deals", params={"page_size": 1}).json()["total"]
    assert next(d for d in datasets["datasets"] if d["name"] == "deals")["visible_rows"] == deals


async def test_a_revoked_token_gets_401(api_server: ApiServer) -> None:
    token, token_id = api_server.token(BOB)
    seen: dict[str, object] = {}
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a 401 mid-session
        async with http_client(api_server, token) as client:
            seen["before"] = structured(await client.call_tool("list_drive_files", {}))  # valid: works
            with api_server.session(BOB) as bob:
                assert bob.delete(f"/api/me/tokens/{token_id}").status_code == 204
                cookie_only = bob.post(
                    "/mcp", json={}, headers={"accept": "application/json, text/event-stream"}
                )
            seen["after"] = await client.call_tool("list_drive_files", {})  # the open session ends with it
    assert "before" in seen and "after" not in seen
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    revoked = httpx.post(
        api_server.mcp_url, json=INITIALIZE, headers={**headers, "authorization": f"Bearer {token}"}
    )
    missing = httpx.post(api_server.mcp_url, json=INITIALIZE, headers=headers)
    garbage = httpx.post(
        api_server.mcp_url, json=INITIALIZE, headers={**headers, "authorization": "Bearer nope"}
    )
    assert revoked.status_code == 401 and revoked.json()["error"] == "not_authenticated"
    assert missing.status_code == 401 and garbage.status_code == 401
    assert cookie_only.status_code == 401  # a session is a person: /mcp is for assistants' tokens
    with pytest.raises(Exception):  # noqa: B017 - the SDK client fails to connect (its error type is the SDK's)
        async with http_client(api_server, token) as client:
            await client.list_tools()
    # the stdio server refuses to start with it, saying why, on stderr (stdout is the protocol's)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["CLEANROOM_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-m", "backend", "mcp", "--api", api_server.api_url],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "token" in done.stderr and done.stdout == ""


async def test_a_foreign_origin_is_refused_even_with_a_valid_token(api_server: ApiServer) -> None:
    """A page elsewhere (DNS rebinding, a hostile site) must not reach /mcp through a browser: a foreign Origin
    is refused before the token is looked at. Controls: the same request with no Origin (the SDK's client,
    curl) and with the console's own Origin initializes."""
    token, _ = api_server.token(BOB)
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
    }
    evil = httpx.post(
        api_server.mcp_url, json=INITIALIZE, headers={**headers, "origin": "https://evil.example"}
    )
    rebound = httpx.post(
        api_server.mcp_url, json=INITIALIZE, headers={**headers, "origin": "http://attacker.test:8000"}
    )
    plain = httpx.post(api_server.mcp_url, json=INITIALIZE, headers=headers)
    ours = httpx.post(
        api_server.mcp_url, json=INITIALIZE, headers={**headers, "origin": api_server.console_url}
    )
    assert evil.status_code == 403 and evil.json()["error"] == "forbidden_origin", evil.text
    assert rebound.status_code == 403
    assert plain.status_code == 200, plain.text
    assert ours.status_code == 200, ours.text


async def test_a_client_that_leaves_mid_wait_loses_nothing(api_server: ApiServer) -> None:
    token, _ = api_server.token(MARIA)
    async with http_client(api_server, token) as client:
        run = structured(
            await client.call_tool(
                "propose_run", {"title": "leave me", "plan": "p", "code": "print(1)", "datasets": ["deals"]}
            )
        )
    with anyio.move_on_after(2):  # the client goes away while get_run waits
        async with http_client(api_server, token) as client:
            await client.call_tool("get_run", {"run_id": run["run_id"], "wait_seconds": 30})
    async with http_client(api_server, token) as client:  # a new connection finds the run as it was
        view = structured(await client.call_tool("get_run", {"run_id": run["run_id"]}))
    assert view["status"] == "awaiting_approval" and view["console_url"] == run["console_url"]
