"""An approved job is checked and run in one place, backend/runs/approved.py, by all three executors: the run
loop (`execution.execute`), a re-run for evidence (`execution.rerun`) and a fleet host's agent. A check added
to `approved.approval_problem` keeps all three from starting a VM, each ending the job its own way (the run
`error`, the re-run `refused`, the host's refusal sent to the API). Control: without it, all three run."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend import execution, sandbox
from backend.execution.rerun import execute_rerun
from backend.fleet.host_agent import HostAgent
from backend.hashing import sha256_file, sha256_text
from backend.runs import approved
from backend.runs.tables import Run
from backend.staging.bundle import bundle_hash
from tests.support.console import ANALYSIS_CODE, execute_with_stand_in_vm, fake_run_code
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = [pytest.mark.usefixtures("acme_on"), pytest.mark.sqlite]  # which path is taken is the app's

REFUSAL = "refused by the check this test added"


def _bundle_tar(tmp: Path) -> tuple[bytes, dict[str, Any]]:
    """A staged bundle as the API sends a host (a tar) and the approval that binds it."""
    (tmp / "datasets").mkdir(parents=True)
    (tmp / "datasets" / "deals.csv").write_text("id,name\n1,Acme\n")
    files = [{"path": "datasets/deals.csv", "sha256": sha256_file(tmp / "datasets" / "deals.csv")}]
    manifest = {"files": files, "bundle_sha256": bundle_hash(files)}
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in ("manifest.json", "datasets/deals.csv"):
            tar.add(tmp / name, arcname=name)
    return out.getvalue(), manifest


async def _host_takes_a_job(tmp_path: Path) -> list[str]:
    """A host agent takes one job against a stand-in API; returns the paths it called."""
    tar, manifest = _bundle_tar(tmp_path / "staged")
    code = "print(1)"
    job = {
        "run_id": 7, "code": code, "code_sha256": sha256_text(code), "approved_code_sha256": sha256_text(code),
        "approved_bundle_sha256": manifest["bundle_sha256"], "approved_at": "2026-12-06T00:00:00Z",
        "manifest": manifest, "limits": {}, "read_actions": True,
        "bundle_url": "/api/v1/worker/runs/7/bundle?sig=x", "result_url": "/api/v1/worker/runs/7/result?sig=x",
    }  # fmt: skip
    calls: list[str] = []

    def api(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path.rsplit("/", 1)[-1])
        if request.url.path.endswith("/claim"):
            return httpx.Response(200, json=job)
        if request.url.path.endswith("/bundle"):
            return httpx.Response(200, content=tar)
        if request.url.path.endswith("/refuse"):
            assert REFUSAL in json.loads(request.content)["problem"]
        return httpx.Response(200, json={"ok": True, "status": "succeeded"})

    http = httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(api))
    agent = HostAgent(host_id="alpha", api_url="http://api.test", token="t", capacity=1, http=http)
    try:
        await agent.handle(7)
    finally:
        await agent.api.aclose()
    return calls


async def _three(client: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, refusing: bool) -> dict:
    await enable_code(evidence_retention_days=7)
    token = await token_for(client, "alice@acme.example")
    first, second = [
        (
            await client.post(
                "/api/runs", json=proposal(code=ANALYSIS_CODE, conversation_id=c), headers=token
            )
        ).json()
        for c in ("conv-a", "conv-b")
    ]
    for run in (first, second):
        assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    assert await execute_with_stand_in_vm(first["id"], monkeypatch) == "succeeded"  # the re-run's original
    client.cookies.clear()
    await login(client, "admin@acme.example")
    rerun = await client.post(f"/api/runs/{first['id']}/reruns")
    assert rerun.status_code in (200, 201, 202), rerun.text
    started: list[str] = []

    def vm(code: str, **kwargs: Any) -> Any:
        started.append(code)
        return fake_run_code(code, **kwargs)

    monkeypatch.setattr(sandbox, "run_code", vm)
    if refusing:
        monkeypatch.setattr(approved, "approval_problem", lambda job: REFUSAL)
    local = await execution.execute(second["id"])
    return {
        "local": (local, await Run.select(Run.error_message).where(Run.id == second["id"]).first()),
        "rerun": await execute_rerun(rerun.json()["id"]),
        "host": await _host_takes_a_job(tmp_path),
        "vms": started,
    }


async def test_a_check_added_to_the_one_run_path_stops_all_three_executors(
    client, monkeypatch, tmp_path
) -> None:
    got = await _three(client, monkeypatch, tmp_path, refusing=True)
    status, row = got["local"]
    assert status == "error" and REFUSAL in row["error_message"], row
    assert got["rerun"] == "refused"
    assert got["host"] == ["claim", "bundle", "refuse"]
    assert got["vms"] == []  # no VM for any of them


async def test_control_without_the_added_check_all_three_run(client, monkeypatch, tmp_path) -> None:
    got = await _three(client, monkeypatch, tmp_path, refusing=False)
    assert got["local"][0] == "succeeded"
    assert got["rerun"] == "finished"
    assert got["host"] == ["claim", "bundle", "vm-started", "result"]
    assert len(got["vms"]) == 3  # the run loop's, the re-run's and the host's
