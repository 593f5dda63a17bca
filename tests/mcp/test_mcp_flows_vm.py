"""A flow through MCP with real VMs: propose two steps over MCP, the token is refused at approve, a person
approves in a session, get_flow waits (with per-step progress notifications) and shows both steps succeeded,
step 2 having read what step 1 handed on. Over streamable HTTP only: two VMs are enough on a small machine."""

from __future__ import annotations

import httpx
import pytest

from tests.support.mcp import MARIA, ApiServer, http_client, structured, text

pytestmark = [pytest.mark.vm, pytest.mark.slow]

ROUNDS = 12  # get_flow waits at most 60 s a call; cold guests under software emulation take minutes

TOTALS = """\
import json
import pandas as pd
deals = pd.read_csv("/work/input/datasets/deals.csv")
print("deals:", len(deals))
json.dump({"deals": len(deals)}, open("/work/output/conclusion.json", "w"))
deals.groupby("stage")["amount"].sum().to_csv("/work/output/by_stage.csv")
"""
READ_BACK = """\
import json, os
conclusion = json.load(open("/work/flow/step-1/conclusion.json"))
stages = open("/work/flow/step-1/by_stage.csv").read().splitlines()
print("step 1 saw", conclusion["deals"], "deals in", len(stages) - 1, "stages")
print("inputs:", sorted(os.listdir("/work/input")))
json.dump({"stages": len(stages) - 1}, open("/work/output/conclusion.json", "w"))
"""


@pytest.fixture(scope="module", autouse=True)
def guest_image() -> None:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)  # waits for a build in progress; builds when missing


async def test_a_person_approves_a_flow_and_get_flow_shows_both_steps(api_server: ApiServer) -> None:
    token, token_id = api_server.token(MARIA)
    async with http_client(api_server, token) as client:
        proposal = structured(
            await client.call_tool(
                "propose_flow",
                {
                    "title": "Deals, then what step 2 makes of them",
                    "plan": "Count deals and sum them by stage; step 2 reads the totals.",
                    "steps": [
                        {"title": "Totals", "code": TOTALS, "datasets": ["deals"]},
                        {
                            "title": "Read back",
                            "code": READ_BACK,
                            "receives": [{"step": 1, "name": "by_stage.csv"}],
                        },
                    ],
                },
            )
        )
        flow_id = proposal["flow_id"]
        assert proposal["status"] == "awaiting_approval"
        hashes = [
            {"code_sha256": s["code_sha256"], "bundle_sha256": s["bundle_sha256"]} for s in proposal["steps"]
        ]
        refused = httpx.post(
            f"{api_server.api_url}/api/flows/{flow_id}/approve",
            json={"steps": hashes},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert refused.status_code == 403 and refused.json()["token_id"] == token_id
        # a person approves in the console (a session, with every step's hashes the approval screen shows)
        approved = api_server.approve_flow(MARIA, flow_id)
        assert approved.status_code == 200 and approved.json()["status"] == "running", approved.text

        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))

        for _ in range(ROUNDS):
            result = await client.call_tool(
                "get_flow", {"flow_id": flow_id, "wait_seconds": 60}, progress_callback=on_progress
            )
            if structured(result)["finished"]:
                break
        view = structured(result)
        assert view["status"] == "succeeded", text(result)
        first, second = view["steps"]
        assert [first["status"], second["status"]] == ["succeeded", "succeeded"], text(result)
        assert view["approved_by"] == MARIA
        deals = first["conclusion"]["deals"]
        assert deals > 0 and f"deals: {deals}" in first["result"]["stdout"]
        outputs = {f["name"]: f for f in first["output_files"]}
        assert sorted(outputs) == ["by_stage.csv", "conclusion.json"]
        # step 2 read step 1's conclusion and the output it received, and staged no data of its own
        assert (
            f"step 1 saw {deals} deals in {second['conclusion']['stages']} stages"
            in second["result"]["stdout"]
        )
        assert "datasets" not in second["result"]["stdout"]
        assert view["credits_total"] > 0
        assert view["credits_total"] == pytest.approx(first["credits_charged"] + second["credits_charged"])
        said = text(result)
        assert "Step 1/2 “Totals”" in said and "Step 2/2 “Read back”" in said and "Conclusion" in said
        messages = [m or "" for _, _, m in progress]
        assert any("step 2/2" in m for m in messages), messages
        assert messages[-1] == f"flow {flow_id}: succeeded", messages
        assert [v for v, _, _ in progress] == sorted(v for v, _, _ in progress)  # never goes backwards
        assert all(total == 7 for _, total, _ in progress)

        csv = (await client.read_resource(outputs["by_stage.csv"]["uri"])).contents[0]
        assert "stage" in csv.text and "amount" in csv.text
