"""Every tool result carries the text a model reads and the same result as structured JSON (the MCP spec's
structuredContent), and that JSON is the API's own schema: a run is the runs API's RunDetail, a flow the flows
API's FlowDetail, a dataset the records API's DatasetInfo, a Drive file the Drive API's DriveFileInfo, with the
same values the API gives the same token. What MCP adds (run_id, console_url, …) comes on top."""

from __future__ import annotations

import json

import httpx
import pytest
from pydantic import ValidationError

from backend.client import CleanroomClient
from backend.drive.schemas import DriveFileInfo
from backend.flows.schemas import FlowDetail
from backend.records.schemas import DatasetInfo
from backend.runs.schemas import RunDetail
from tests.support.mcp import MARIA, ApiServer, http_client, structured, text

pytestmark = pytest.mark.slow  # a real API server


async def test_results_carry_text_and_the_apis_own_json(api_server: ApiServer) -> None:
    token, _ = api_server.token(MARIA)
    async with http_client(api_server, token) as client:
        proposed = structured(
            await client.call_tool(
                "propose_run", {"title": "both", "plan": "p", "code": "print(1)", "datasets": ["deals"]}
            )
        )
        got = await client.call_tool("get_run", {"run_id": proposed["run_id"]})
        flow_id = structured(
            await client.call_tool(
                "propose_flow",
                {
                    "title": "both",
                    "plan": "p",
                    "steps": [{"title": "one", "code": "print(1)", "datasets": ["deals"]}],
                },
            )
        )["flow_id"]
        flow = await client.call_tool("get_flow", {"flow_id": flow_id})
        datasets = await client.call_tool("list_datasets", {})
        files = await client.call_tool("list_drive_files", {})
    with httpx.Client(
        base_url=api_server.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as api:
        run_json = api.get(f"/api/runs/{proposed['run_id']}").json()
        flow_json = api.get(f"/api/flows/{flow_id}").json()
        datasets_json = api.get("/api/records/").json()
        files_json = api.get("/api/drive/files", params={"all": "true"}).json()

    # the text a model reads, and the structured JSON, in one result
    run = structured(got)
    assert f"Run {run['id']} “both”: awaiting_approval" in text(got) and run["console_url"] in text(got)
    assert RunDetail.model_validate(run) == RunDetail.model_validate(run_json)
    assert run["run_id"] == run["id"] and run["finished"] is False  # what MCP adds, on top

    view = structured(flow)
    assert f"Flow {flow_id} “both”: awaiting_approval" in text(flow)
    assert FlowDetail.model_validate(view) == FlowDetail.model_validate(flow_json)
    assert view["steps"][0]["run_id"] == view["steps"][0]["run"]["id"]

    # a listing's text is its JSON, and each entry is the API's own
    listing = structured(datasets)
    assert json.loads(text(datasets)) == listing
    readable = {d["name"]: DatasetInfo.model_validate(d) for d in datasets_json if d["access"]}
    assert {d["name"]: DatasetInfo.model_validate(d) for d in listing["datasets"]} == readable
    drive = structured(files)
    assert json.loads(text(files)) == drive and drive["files"]
    by_id = {f["id"]: DriveFileInfo.model_validate(f) for f in files_json}
    for f in drive["files"]:
        assert DriveFileInfo.model_validate(f) == by_id[f["id"]]

    # control: the check has teeth, JSON missing a field of the API's schema does not pass as it
    with pytest.raises(ValidationError, match="code_sha256"):
        RunDetail.model_validate({k: v for k, v in run.items() if k != "code_sha256"})
    with pytest.raises(ValidationError, match="flow_sha256"):
        FlowDetail.model_validate({k: v for k, v in view.items() if k != "flow_sha256"})


# ------------------------------------------------------------------ a finished run, in-process (no VM needed)

NOW = "2026-12-02T09:00:00Z"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
CSV = b"stage,amount\n" + b"won,10\n" * 4000  # over the inline text cap


def _file(file_id: int, name: str, kind: str, size: int) -> dict:
    return DriveFileInfo(
        id=file_id,
        name=name,
        size=size,
        sha256="a" * 64,
        kind=kind,
        folder_id=3,
        owner_id=1,
        visibility="private",
        run_id=7,
        source_datasets=["deals"],
        created_at=NOW,
    ).model_dump(mode="json")


FINISHED = {
    "id": 7,
    "title": "Pipeline",
    "plan": "p",
    "conversation_id": "c",
    "status": "succeeded",
    "attempt": 1,
    "max_attempts": 3,
    "previous_attempt_id": None,
    "diff": None,
    "requested_by": {"id": 1, "email": MARIA, "name": "Maria"},
    "created_at": NOW,
    "code": "print('done')",
    "code_sha256": "c" * 64,
    "datasets": ["deals"],
    "file_ids": [],
    "manifest": {
        "files": [{"path": "datasets/deals.csv", "source": {"type": "dataset", "dataset": "deals"}}]
    },
    "bundle_sha256": "b" * 64,
    "findings": [],
    "limits": {"wall_seconds": 120, "memory_mib": 2048, "vcpus": 2},
    "approval": {
        "kind": "person",
        "by": MARIA,
        "at": NOW,
        "code_sha256": "c" * 64,
        "bundle_sha256": "b" * 64,
    },
    "rejection": None,
    "narrowed_from": None,
    "followup_grant": None,
    "followup_grant_on_approval": None,
    "followup_note": None,
    "schedule_id": None,
    "can_decide": False,
    "approve_blocked_reason": None,
    "result": {"status": "succeeded", "exit_code": 0, "stdout": "x" * 40_000},
    "error_message": None,
    "output_files": [_file(11, "chart.png", "image", len(PNG)), _file(12, "by_stage.csv", "csv", len(CSV))],
    "output_folder_id": 3,
    "credits_charged": 1.5,
    "actions_discarded": False,
    "actions_note": None,
    "action_items_count": 1,
    "started_at": NOW,
    "finished_at": NOW,
}
ITEM = {
    "id": 5,
    "run_id": 7,
    "flow_id": None,
    "flow_step": None,
    "index": 0,
    "op": "update",
    "dataset": "deals",
    "record_id": 12,
    "changes": {"probability": 80},
    "before": {"probability": 50},
    "reason": "won already",
    "status": "pending",
    "problem": None,
    "raw": None,
    "decided_by": None,
    "decided_at": None,
    "created_record_id": None,
    "unreviewed_run": False,
}


class FinishedRunApi(CleanroomClient):
    """The typed client over the answers the API would give for one finished run of Maria's, its two output
    files and its proposed change (decoded into the schemas as the real answers are)."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type] - `send` answers: no HTTP client is used

    async def send(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        files = {"/api/drive/files/11/content": PNG, "/api/drive/files/12/content": CSV}
        if path in files:
            return httpx.Response(200, content=files[path], headers={"content-type": ""})
        return httpx.Response(200, json={"/api/runs/7": FINISHED, "/api/runs/7/action-items": [ITEM]}[path])


async def test_a_finished_runs_result_is_text_images_links_and_the_apis_json() -> None:
    from mcp import Client
    from mcp_types import ImageContent, ResourceLink, TextContent

    from backend.actions.schemas import ActionItemInfo
    from backend.mcp.tools import build_server
    from backend.runs.schemas import RunResult

    server = build_server(lambda _ctx: FinishedRunApi(), console_url="http://console")
    async with Client(server) as client:
        result = await client.call_tool("get_run", {"run_id": 7})
    run = structured(result)
    summary, image, chart_link, csv_text, csv_link = result.content  # each file: inline, then its link
    assert isinstance(summary, TextContent) and "Run 7 “Pipeline”: succeeded" in summary.text
    assert "(printed output cut; the whole of it is in the console at http://console/runs/7)" in summary.text
    assert "- item 5: update deals #12 {'probability': 80} — pending: won already" in summary.text
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert isinstance(csv_text, TextContent) and csv_text.text.startswith("by_stage.csv (")
    assert isinstance(chart_link, ResourceLink) and chart_link.uri == "cleanroom://runs/7/files/chart.png"
    assert isinstance(csv_link, ResourceLink) and csv_link.uri == "cleanroom://runs/7/files/by_stage.csv"
    # the structured JSON is the runs API's RunDetail, its parts the API's own schemas
    detail = RunDetail.model_validate(run)
    assert detail.id == 7 and detail.code_sha256 == "c" * 64
    assert [DriveFileInfo.model_validate(f) for f in run["output_files"]] == [
        DriveFileInfo.model_validate(f) for f in FINISHED["output_files"]
    ]
    assert [f["inline"] for f in run["output_files"]] == [True, True]
    assert [ActionItemInfo.model_validate(i) for i in run["action_items"]] == [
        ActionItemInfo.model_validate(ITEM)
    ]
    printed = RunResult.model_validate(run["result"])
    assert len(printed.stdout) == 32 * 1024 and run["result"]["returned_truncated"] is True
