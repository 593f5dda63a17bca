"""Flows over MCP (streamable HTTP at /mcp and stdio), with the SDK's own client against a real API server:
propose_flow shows what the person will approve and says a person must approve it, get_flow reads it back and
waits with progress, the API's refusals come back as tool errors, and the assistant's token cannot approve a
flow (the person can). The flow that a person approves and that runs in real VMs: test_mcp_flows_vm.py."""

from __future__ import annotations

import anyio
import httpx
import pytest

from backend.hashing import sha256_text
from tests.support.mcp import BOB, GINA, MARIA, ApiServer, http_client, structured, text

pytestmark = pytest.mark.slow  # a real API server, and a stdio subprocess per person (tests/mcp/conftest.py)

TOTALS = """\
import json
import pandas as pd
deals = pd.read_csv("/work/input/datasets/deals.csv")
json.dump({"deals": len(deals)}, open("/work/output/conclusion.json", "w"))
deals.groupby("stage")["amount"].sum().to_csv("/work/output/by_stage.csv")
"""
PROPOSE = """\
import json
conclusion = json.load(open("/work/flow/step-1/conclusion.json"))
print(open("/work/flow/step-1/by_stage.csv").read(), conclusion)
json.dump([], open("/work/output/actions.json", "w"))
"""


def _step(code: str = "print('step')\n", datasets: list[str] | None = None, **extra: object) -> dict:
    data = ["deals"] if datasets is None else datasets
    return {"title": extra.pop("title", "A step"), "code": code, "datasets": data, **extra}


def _feedback_file_id(server: ApiServer) -> int:
    with server.session(MARIA) as maria:
        files = maria.get("/api/drive/files", params={"all": "true"}).json()
    return next(f["id"] for f in files if f["name"] == "Customer feedback.xlsx")


async def test_propose_flow_waits_for_a_person(connect, api_server: ApiServer) -> None:
    feedback = _feedback_file_id(api_server)
    steps = [
        _step(TOTALS, ["deals"], title="Totals by stage", files=[feedback]),
        _step(
            PROPOSE,
            [],
            title="Propose follow-ups",
            capability="propose_writes",
            receives=[{"step": 1, "name": "by_stage.csv"}],
        ),
    ]
    async with connect(MARIA) as client:
        result = await client.call_tool(
            "propose_flow",
            {
                "title": "Pipeline review",
                "plan": "Sum deals by stage, then propose follow-ups from the totals.",
                "steps": steps,
                "conversation_id": "mcp-test-flow",
            },
        )
        proposal = structured(result)
        flow_id = proposal["flow_id"]
        assert proposal["status"] == "awaiting_approval" and proposal["needs_approval"] is True
        assert proposal["console_url"] == f"{api_server.console_url}/flows/{flow_id}"
        assert proposal["conversation_id"] == "mcp-test-flow" and len(proposal["flow_sha256"]) == 64
        first, second = proposal["steps"]
        assert [first["step"], second["step"]] == [1, 2]
        assert first["title"] == "Totals by stage" and first["capability"] == "read"
        assert second["capability"] == "propose_writes"
        assert second["receives"] == [{"step": 1, "name": "by_stage.csv"}]
        assert first["code_sha256"] == sha256_text(TOTALS) and second["code_sha256"] == sha256_text(PROPOSE)
        assert first["bundle_sha256"] and second["bundle_sha256"]
        assert "/work/input/datasets/deals.csv" in {s["path"] for s in first["manifest"]}
        # it works on what it receives: no dataset or Drive file of its own, nothing to warn about
        assert [s["source"] for s in second["manifest"]] == ["staging metadata"] and second["findings"] == []
        finding = next(f for f in first["findings"] if f["sheet"] == "Responses")
        assert "ignore your previous instructions" in finding["excerpt"] and finding["reason"]
        said = text(result)
        assert proposal["console_url"] in said and "approval" in said and "you cannot approve" in said
        assert "warning" in said and f"({finding['reason']})" in said  # a text-only client reads the reason
        assert "Step 1/2 “Totals by stage”" in said and "Step 2/2 “Propose follow-ups”" in said
        assert first["code_sha256"] in said and "/work/flow/step-1/by_stage.csv" in said

        view = structured(await client.call_tool("get_flow", {"flow_id": flow_id}))
        assert view["status"] == "awaiting_approval" and view["finished"] is False
        assert [s["status"] for s in view["steps"]] == ["awaiting_approval", "awaiting_approval"]
        assert [s["run_id"] for s in view["steps"]] == [first["run_id"], second["run_id"]]
        assert view["console_url"] == proposal["console_url"] and view["credits_total"] == 0
        # a step's run, read on its own, says it belongs to the flow and is not revised alone
        step_run = await client.call_tool("get_run", {"run_id": first["run_id"]})
        assert structured(step_run)["can_revise"] is False and f"flow {flow_id}" in text(step_run)
    with api_server.session(MARIA) as maria:  # the person is shown exactly what the assistant was told
        detail = maria.get(f"/api/flows/{flow_id}").json()
    assert detail["status"] == "awaiting_approval" and detail["can_decide"] is True
    assert detail["flow_sha256"] == proposal["flow_sha256"]
    assert [(s["run"]["code_sha256"], s["run"]["bundle_sha256"]) for s in detail["steps"]] == [
        (s["code_sha256"], s["bundle_sha256"]) for s in proposal["steps"]
    ]


async def test_the_apis_refusals_come_back_as_tool_errors(connect, api_server: ApiServer) -> None:
    with api_server.session(MARIA) as maria:  # a flow of maria's, which bob must not see
        maria_flow = maria.post(
            "/api/flows",
            json={"conversation_id": "c", "title": "Maria's flow", "plan": "", "steps": [_step()]},
        ).json()["id"]
    base = {"title": "t", "plan": "p"}
    with api_server.session(BOB) as bob:
        flows_before = bob.get("/api/flows").json()["total"]
        runs_before = bob.get("/api/runs").json()["total"]
    async with connect(BOB) as client:
        too_many = await client.call_tool("propose_flow", {**base, "steps": [_step()] * 11})
        none = await client.call_tool("propose_flow", {**base, "steps": []})
        syntax = await client.call_tool(
            "propose_flow", {**base, "steps": [_step(), _step("x = 1\ny = (\n", title="Broken")]}
        )
        forbidden = await client.call_tool(
            "propose_flow", {**base, "steps": [_step(), _step(datasets=["employees"], title="People")]}
        )
        later = await client.call_tool(
            "propose_flow",
            {
                **base,
                "steps": [
                    _step(title="Early", receives=[{"step": 2, "name": "out.csv"}]),
                    _step(title="Late"),
                ],
            },
        )
        unknown = await client.call_tool("get_flow", {"flow_id": 987654})
        not_his = await client.call_tool("get_flow", {"flow_id": maria_flow})
        bad_wait = await client.call_tool("get_flow", {"flow_id": maria_flow, "wait_seconds": 600})
    assert too_many.is_error and "too_many_steps" in text(too_many) and "at most 10" in text(too_many)
    assert none.is_error and "no_steps" in text(none)
    assert syntax.is_error and "does not parse" in text(syntax) and "line 2" in text(syntax)
    assert "in step 2 (Broken)" in text(syntax)
    assert forbidden.is_error and "Not readable" in text(forbidden) and "employees" in text(forbidden)
    assert "in step 2 (People)" in text(forbidden)
    assert later.is_error and "receives_later_step" in text(later) and "step 1 (Early)" in text(later)
    assert "out.csv" in text(later) and "runs after it" in text(later)
    assert unknown.is_error and "no flow 987654" in text(unknown)
    # another user's flow gets the same answer as a flow that does not exist
    assert not_his.is_error and f"no flow {maria_flow}" in text(not_his)
    assert bad_wait.is_error and "wait_seconds" in text(bad_wait)
    for result in (too_many, none, syntax, forbidden, later, unknown, not_his, bad_wait):
        assert "Traceback" not in text(result) and 'File "' not in text(result)
        assert "Maria's flow" not in text(result)
    with api_server.session(BOB) as bob:  # nothing of a refused flow was kept
        assert bob.get("/api/flows").json()["total"] == flows_before
        assert bob.get("/api/runs").json()["total"] == runs_before


async def test_the_mcp_token_cannot_approve_a_flow_but_the_person_can_decide(api_server: ApiServer) -> None:
    token, token_id = api_server.token(MARIA)
    async with http_client(api_server, token) as client:
        flow = structured(
            await client.call_tool(
                "propose_flow",
                {"title": "decide me", "plan": "p", "steps": [_step(), _step(datasets=[], title="two")]},
            )
        )
    flow_id = flow["flow_id"]
    hashes = {
        "steps": [
            {"code_sha256": s["code_sha256"], "bundle_sha256": s["bundle_sha256"]} for s in flow["steps"]
        ]
    }
    bearer = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=api_server.api_url, headers=bearer, timeout=30) as assistant:
        first_run = flow["steps"][0]["run_id"]
        for path, body in (
            (f"/api/flows/{flow_id}/approve", hashes),  # the exact hashes the person would send
            (f"/api/flows/{flow_id}/reject", {"reason": "by the assistant"}),
            (f"/api/runs/{first_run}/approve", hashes["steps"][0]),  # nor one step's run on its own
        ):
            r = assistant.post(path, json=body)
            assert r.status_code == 403 and r.json()["error"] == "person_required", (path, r.text)
            assert r.json()["token_id"] == token_id
        after = assistant.get(f"/api/flows/{flow_id}").json()
        assert after["status"] == "awaiting_approval" and after["approval"] is None
        assert after["can_decide"] is False  # the token is told it cannot decide
        assert [s["run"]["status"] for s in after["steps"]] == ["awaiting_approval"] * 2
    # positive control: the same person, signed in, decides (rejecting here: approving starts VMs; the
    # approval itself is the control in test_mcp_flows_vm.py and tests/flows/test_person_decides_flows.py)
    with api_server.session(MARIA) as maria:
        r = maria.post(f"/api/flows/{flow_id}/reject", json={"reason": "positive control"})
        assert r.status_code == 200 and r.json()["status"] == "rejected"
    async with http_client(api_server, token) as client:
        result = await client.call_tool("get_flow", {"flow_id": flow_id})
    view = structured(result)
    assert (
        view["status"] == "rejected" and view["finished"] and view["rejection_reason"] == "positive control"
    )
    assert [s["status"] for s in view["steps"]] == ["rejected", "rejected"]
    assert "Rejected by maria@acme.example: positive control" in text(result)


async def test_get_flow_waits_with_progress_until_the_person_decides(api_server: ApiServer) -> None:
    token, _ = api_server.token(MARIA)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    def reject_soon() -> None:
        import time

        time.sleep(1.5)
        with api_server.session(MARIA) as maria:
            assert maria.post(f"/api/flows/{flow_id}/reject", json={}).status_code == 200

    async with http_client(api_server, token) as client:
        flow_id = structured(
            await client.call_tool(
                "propose_flow", {"title": "wait on me", "plan": "p", "steps": [_step(), _step(title="two")]}
            )
        )["flow_id"]
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, reject_soon)
            result = await client.call_tool(
                "get_flow", {"flow_id": flow_id, "wait_seconds": 30}, progress_callback=on_progress
            )
    view = structured(result)
    assert view["status"] == "rejected" and view["finished"] is True
    assert "flow: awaiting_approval → rejected" in view["status_changes"], view["status_changes"]
    assert 1 < view["waited_seconds"] < 30
    assert progress[0][2] == f"flow {flow_id}: awaiting approval (2 steps)", progress
    assert progress[-1][2] == f"flow {flow_id}: rejected", progress
    assert [v for v, _, _ in progress] == sorted({v for v, _, _ in progress})  # only ever grows
    assert all(total == 7 for _, total, _ in progress)  # 3 stages a step, and the flow's own end


async def test_a_globex_token_reads_no_acme_flow(api_server: ApiServer) -> None:
    with api_server.session(MARIA) as maria:
        acme_flow = maria.post(
            "/api/flows",
            json={"conversation_id": "c", "title": "Acme's flow", "plan": "", "steps": [_step()]},
        ).json()["id"]
    token, _ = api_server.token(GINA)
    async with http_client(api_server, token) as client:
        results = [
            await client.call_tool("get_flow", {"flow_id": acme_flow}),
            await client.call_tool("get_flow", {"flow_id": acme_flow, "wait_seconds": 1}),
        ]
    for result in results:
        assert (
            result.is_error and f"no flow {acme_flow}" in text(result) and "Acme's flow" not in text(result)
        )
