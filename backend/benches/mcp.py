"""`cleanroom bench mcp`: what MCP costs on top of the plain HTTP API, on a real API server.

A fresh demo database in a temporary folder and `cleanroom serve --no-console` on a free port (its worker runs
real VMs). Maria's assistant proposes the demo chart run over MCP, she approves it in a session, it runs. Then:
- `get_run` of that finished run over MCP (streamable HTTP at /mcp; and over stdio) against the plain HTTP
  `GET /api/runs/{id}`, and against the plain HTTP calls that fetch the same data (the run, its action items and
  its chart): p50 ratios, goal ≤ 1.5× against the plain call;
- propose→approval-visible: how long `propose_run` takes until the person's approval list shows the run, and
  how long after the person's approval an MCP `get_run` that is waiting (`until="change"`) reports it.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import httpx

from backend.benches import ApiServer, summarize
from backend.settings import REPO_ROOT

MARIA = "maria@acme.example"
SAMPLES = 30
LATENCY_SAMPLES = 8


def run_mcp_bench(samples: int = SAMPLES, latency_samples: int = LATENCY_SAMPLES) -> dict[str, Any]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)
    with ApiServer() as server:
        return anyio.run(_bench, server, samples, latency_samples)


async def _bench(server: ApiServer, samples: int, latency_samples: int) -> dict[str, Any]:
    import httpx2
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    from backend.demo.seed import DEMO_RUN_CODE

    person = httpx.AsyncClient(base_url=server.url, headers={"Origin": server.url}, timeout=60)
    r = await person.post("/api/auth/login", json={"email": MARIA, "password": "demo"})
    r.raise_for_status()
    token = (await person.post("/api/me/tokens", json={"name": "bench"})).json()["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    plain = httpx.AsyncClient(base_url=server.url, headers=bearer, timeout=60)

    async def approve(run_id: int) -> None:
        run = (await person.get(f"/api/runs/{run_id}")).json()
        hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
        (await person.post(f"/api/runs/{run_id}/approve", json=hashes)).raise_for_status()

    async def finish(client: Client, run_id: int) -> dict[str, Any]:
        for _ in range(20):
            view = (
                await client.call_tool("get_run", {"run_id": run_id, "wait_seconds": 60})
            ).structured_content
            if view["finished"]:
                return view
        raise RuntimeError(f"run {run_id} did not finish")

    async with (
        httpx2.AsyncClient(headers=bearer, timeout=httpx2.Timeout(30, read=300)) as http2,
        Client(streamable_http_client(server.url + "/mcp", http_client=http2)) as mcp_http,
    ):
        proposal = await mcp_http.call_tool(
            "propose_run", {"title": "bench chart", "plan": "p", "code": DEMO_RUN_CODE, "datasets": ["deals"]}
        )
        run_id = proposal.structured_content["run_id"]
        await approve(run_id)
        finished = await finish(mcp_http, run_id)
        if finished["status"] != "succeeded" or not finished["output_files"]:
            raise RuntimeError(f"the bench run did not produce its chart: {finished}")
        file_id = finished["output_files"][0]["id"]

        async def plain_get() -> None:
            (await plain.get(f"/api/runs/{run_id}")).raise_for_status()

        async def plain_same_data() -> None:
            (await plain.get(f"/api/runs/{run_id}")).raise_for_status()
            (await plain.get(f"/api/runs/{run_id}/action-items")).raise_for_status()
            (await plain.get(f"/api/drive/files/{file_id}/content")).raise_for_status()

        async def over(client: Client, include_outputs: bool = True) -> None:
            result = await client.call_tool("get_run", {"run_id": run_id, "include_outputs": include_outputs})
            if result.is_error:
                raise RuntimeError(str(result.content))

        env = {**server.env, "CLEANROOM_TOKEN": token}
        stdio = StdioServerParameters(
            command=sys.executable,
            args=["-m", "backend", "mcp", "--api", server.url],
            env=env,
            cwd=str(REPO_ROOT),
        )
        timings: dict[str, list[float]] = {
            "mcp_http": [],
            "mcp_http_links_only": [],
            "mcp_stdio": [],
            "plain": [],
            "plain_same_data": [],
        }
        async with Client(stdio) as mcp_stdio:
            calls = {
                "mcp_http": lambda: over(mcp_http),
                "mcp_http_links_only": lambda: over(mcp_http, include_outputs=False),
                "mcp_stdio": lambda: over(mcp_stdio),
                "plain": plain_get,
                "plain_same_data": plain_same_data,
            }
            for _ in range(3):  # warm up
                for call in calls.values():
                    await call()
            for _ in range(samples):  # interleaved, so load drifts hit every kind alike
                for name, call in calls.items():
                    started = time.perf_counter()
                    await call()
                    timings[name].append((time.perf_counter() - started) * 1000)

        propose_ms, listed_ms, approval_visible_ms = [], [], []
        for i in range(latency_samples):
            started = time.perf_counter()
            result = await mcp_http.call_tool(
                "propose_run",
                {"title": f"latency {i}", "plan": "p", "code": "print(1)\n", "datasets": ["deals"]},
            )
            propose_ms.append((time.perf_counter() - started) * 1000)
            rid = result.structured_content["run_id"]
            waiting = (await person.get("/api/runs", params={"status": "awaiting_approval"})).json()["items"]
            if not any(r["id"] == rid for r in waiting):
                raise RuntimeError(f"run {rid} is not on the approval list")
            listed_ms.append((time.perf_counter() - started) * 1000)

            async with anyio.create_task_group() as tg:
                seen: dict[str, float] = {}

                async def wait_for_change(rid: int = rid, seen: dict[str, float] = seen) -> None:
                    await mcp_http.call_tool(
                        "get_run", {"run_id": rid, "wait_seconds": 30, "until": "change"}
                    )
                    seen["at"] = time.perf_counter()

                tg.start_soon(wait_for_change)
                await anyio.sleep(0.5)
                await approve(rid)
                approved_at = time.perf_counter()
            approval_visible_ms.append((seen["at"] - approved_at) * 1000)
            await finish(mcp_http, rid)  # one VM at a time: the next sample is not measured under its load

    await plain.aclose()
    await person.aclose()
    from backend.mcp.tools.waiting import POLL_SECONDS

    p50 = {name: summarize(values)["p50"] for name, values in timings.items()}
    return {
        "get_run_finished_mcp_http_ms": summarize(timings["mcp_http"]),
        "get_run_finished_mcp_http_links_only_ms": summarize(timings["mcp_http_links_only"]),
        "get_run_finished_mcp_stdio_ms": summarize(timings["mcp_stdio"]),
        "get_run_plain_http_ms": summarize(timings["plain"]),
        "get_run_plain_http_same_data_ms": summarize(timings["plain_same_data"]),
        "p50_ratio_mcp_http_vs_plain": round(p50["mcp_http"] / p50["plain"], 2),
        "p50_ratio_mcp_http_vs_plain_same_data": round(p50["mcp_http"] / p50["plain_same_data"], 2),
        "p50_ratio_mcp_http_links_only_vs_plain": round(p50["mcp_http_links_only"] / p50["plain"], 2),
        "p50_ratio_mcp_stdio_vs_plain": round(p50["mcp_stdio"] / p50["plain"], 2),
        "goal_ratio": 1.5,
        "propose_run_mcp_ms": summarize(propose_ms),
        "propose_to_on_approval_list_ms": summarize(listed_ms),
        "approval_to_visible_over_mcp_ms": summarize(approval_visible_ms),
        "poll_interval_ms": int(POLL_SECONDS * 1000),
    }
