"""The whole loop through MCP with a real VM: propose over MCP, the token is refused at approve, a person
approves in a session, get_run waits (with progress notifications) and returns the chart as an image that
decodes and the proposed change. Over streamable HTTP and over stdio."""

from __future__ import annotations

import base64
import io

import pytest
from mcp_types import ImageContent, ResourceLink

from backend.demo.seed import DEMO_RUN_CODE
from tests.support.mcp import ACME_ADMIN, GINA, MARIA, ApiServer, http_client, structured, text

pytestmark = [pytest.mark.vm, pytest.mark.slow]

ROUNDS = 12  # get_run waits at most 60 s a call; a cold guest under software emulation takes minutes


@pytest.fixture(scope="module", autouse=True)
def guest_image() -> None:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)  # waits for a build in progress; builds when missing


async def _wait_until_finished(
    client, run_id: int, progress: list[tuple[float, float | None, str | None]]
) -> object:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    for _ in range(ROUNDS):
        result = await client.call_tool(
            "get_run", {"run_id": run_id, "wait_seconds": 60}, progress_callback=on_progress
        )
        if structured(result)["finished"]:
            return result
    raise AssertionError(f"run {run_id} did not finish: {text(result)}")


async def test_propose_approve_and_read_the_chart_back(connect, api_server: ApiServer) -> None:
    from PIL import Image

    async with connect(MARIA) as client:
        proposal = structured(
            await client.call_tool(
                "propose_run",
                {
                    "title": "Open pipeline by stage",
                    "plan": "Sum open deals by stage, chart it, propose one probability change.",
                    "code": DEMO_RUN_CODE,
                    "datasets": ["deals"],
                },
            )
        )
        run_id = proposal["run_id"]
        assert proposal["status"] == "awaiting_approval"
        # a person approves in the console (a session, with the hashes the approval screen shows)
        approved = api_server.approve(MARIA, run_id)
        # queued, or already running: an approval wakes the server's worker at once
        assert approved.status_code == 200 and approved.json()["status"] in ("queued", "running"), (
            approved.text
        )

        progress: list[tuple[float, float | None, str | None]] = []
        result = await _wait_until_finished(client, run_id, progress)
        view = structured(result)
        assert view["status"] == "succeeded", text(result)
        assert view["approved_by"] == MARIA and view["result"]["exit_code"] == 0
        assert "Open pipeline by stage" in view["result"]["stdout"]
        messages = [m or "" for _, _, m in progress]
        assert any("succeeded" in m for m in messages), messages
        assert [v for v, _, _ in progress] == sorted(v for v, _, _ in progress)  # never goes backwards
        assert all(total == 3 for _, total, _ in progress)

        images = [b for b in result.content if isinstance(b, ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        chart = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
        assert chart.format == "PNG" and chart.size[0] > 100 and chart.size[1] > 100
        links = [b for b in result.content if isinstance(b, ResourceLink)]
        assert [link.uri for link in links] == [f"cleanroom://runs/{run_id}/files/pipeline_by_stage.png"]
        assert view["output_files"][0]["inline"] is True

        item = view["action_items"][0]
        assert (
            item["op"] == "update" and item["dataset"] == "deals" and item["changes"] == {"probability": 80}
        )
        assert item["status"] == "pending" and "item" in text(result)

        whole = (await client.read_resource(links[0].uri)).contents[0]
        assert whole.mime_type == "image/png"
        assert base64.b64decode(whole.blob) == base64.b64decode(images[0].data)

    # another company's token reads none of it, through any tool or the resource
    token, _ = api_server.token(GINA)
    async with http_client(api_server, token) as globex:
        assert (await globex.call_tool("get_run", {"run_id": run_id})).is_error
        with pytest.raises(Exception) as refused:
            await globex.read_resource(links[0].uri)
        assert "Open pipeline" not in str(refused.value) and "probability" not in str(refused.value)


async def test_follow_ups_and_revisions(api_server: ApiServer) -> None:
    """A follow-up inside the grant of a person's approval runs without a new one; one that widens the data
    waits. A failed run is revised: attempt 2 of 3 with the diff the person will see."""
    with api_server.session(ACME_ADMIN) as admin:
        r = admin.patch("/api/company/settings", json={"followup_without_reapproval": True})
        assert r.status_code == 200, r.text
    try:
        token, _ = api_server.token(MARIA)
        async with http_client(api_server, token) as client:
            first = structured(
                await client.call_tool(
                    "propose_run",
                    {"title": "broken", "plan": "p", "code": "raise SystemExit(3)\n", "datasets": ["deals"]},
                )
            )
            assert api_server.approve(MARIA, first["run_id"]).status_code == 200
            failed = structured(await _wait_until_finished(client, first["run_id"], []))
            assert failed["status"] == "failed" and failed["can_revise"] is True

            revised = structured(
                await client.call_tool("revise_run", {"run_id": first["run_id"], "code": "print('fixed')\n"})
            )
            assert revised["attempt"] == 2 and revised["attempt_label"] == "attempt 2 of 3"
            assert (
                revised["status"] == "awaiting_approval" and revised["previous_attempt_id"] == first["run_id"]
            )
            assert "-raise SystemExit(3)" in revised["diff"] and "+print('fixed')" in revised["diff"]

            narrow = structured(
                await client.call_tool(
                    "ask_followup",
                    {
                        "followup_of": first["run_id"],
                        "title": "again",
                        "plan": "p",
                        "code": "print('again')\n",
                        "datasets": ["deals"],
                    },
                )
            )
            assert narrow["approved_without_review"] is True and narrow["needs_approval"] is False
            assert narrow["conversation_id"] == first["conversation_id"]
            wider = structured(
                await client.call_tool(
                    "ask_followup",
                    {
                        "followup_of": first["run_id"],
                        "title": "wider",
                        "plan": "p",
                        "code": "print(1)\n",
                        "datasets": ["deals", "accounts"],
                    },
                )
            )
            assert wider["needs_approval"] is True and wider["followup_note"]
            done = structured(await _wait_until_finished(client, narrow["run_id"], []))
            assert done["status"] == "succeeded" and "again" in done["result"]["stdout"]
    finally:
        with api_server.session(ACME_ADMIN) as admin:
            admin.patch("/api/company/settings", json={"followup_without_reapproval": False})
