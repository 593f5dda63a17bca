"""A flow's steps run on a fleet worker: what the worker hands back over the result upload is filed like
the in-process worker files it, tags and all (review N-H1), and a conclusion nested too deeply fails its
step with a clear message instead of a 500 (review Low 7).

No VM and no job queue here: each step is put in the hands of host `alpha` as its claim would (running
on that host, its carry built), the worker's side fetches the carry by its signed URL and runs the step's
trusted test code with the stand-in of tests/flows/test_flow_tags.py, and uploads the result by its signed
URL. The API's side - the carry, the result handler, filing and tagging - is the product's own code."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from backend.fleet import service, transfer
from backend.flows import progress
from backend.runs.tables import Run, RunStatus
from tests.flows.conftest import hannah_in_east, hannah_under_maria  # noqa: F401 - fixtures
from tests.support.flows import (
    HANNAH,
    MARIA,
    SEES_ALL,
    SEES_NOTHING,
    approve_flow_as,
    drive_view,
    flow_as,
    flow_body,
    host_vm,
    outputs,
    step,
    two_steps,
)
from tests.support.http import token_for

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("hannah_under_maria")]


async def _worker(client: Any, host_id: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {await service.enroll(host_id, created_by='test')}"}
    response = await client.post("/api/worker/hosts", json={"capacity": 2}, headers=headers)
    assert response.status_code == 200, response.text
    return headers


async def _propose_and_approve(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    token = await token_for(client, HANNAH)
    r = await client.post("/api/flows", json=body, headers=token)
    assert r.status_code == 201, r.text
    assert (await approve_flow_as(client, HANNAH, r.json())).status_code == 200
    client.cookies.clear()
    return r.json()


async def _run_step_on(client: Any, worker: dict[str, str], run_id: int, scratch: Path) -> Any:
    """The step, queued, held by `alpha` as its claim leaves it; the worker's side runs it and uploads."""
    row = await Run.select().where(Run.id == run_id).output(load_json=True).first()
    assert row["status"] == RunStatus.queued, row["status"]
    now = datetime.now(UTC)
    await Run.update(
        {Run.status: RunStatus.running, Run.host_id: "alpha", Run.started_at: now, Run.vm_started_at: now}
    ).where(Run.id == run_id)
    await progress.carry_in({**row, "status": RunStatus.running})  # what the claim does for a flow's step
    carry = await client.get(service.signed_path(run_id, "alpha", "carry"), headers=worker)
    assert carry.status_code == 200, carry.text
    here = scratch / f"run-{run_id}"
    (here / "out").mkdir(parents=True)
    (here / "carry.tar").write_bytes(carry.content)
    transfer.unpack(here / "carry.tar", here / "carry", max_members=100, max_bytes=10_000_000)
    result = host_vm(
        row["code"], input_dir=Path(row["bundle_dir"]), out_dir=here / "out", carry_dir=here / "carry"
    )
    packed = here / "result.tar"
    transfer.pack_result(
        result.model_dump_json().encode(), here / "out", [f.name for f in result.files], packed
    )
    return await client.post(
        service.signed_path(run_id, "alpha", "result"),
        content=packed.read_bytes(),
        headers={**worker, "Content-Type": "application/x-tar"},
    )


async def test_a_later_step_run_by_a_fleet_worker_is_tagged_with_what_reached_it(client, tmp_path) -> None:
    flow = await _propose_and_approve(client, two_steps())
    worker = await _worker(client, "alpha")
    for s in flow["steps"]:
        filed = await _run_step_on(client, worker, s["run"]["id"], tmp_path)
        assert filed.status_code == 200 and filed.json()["status"] == "succeeded", filed.text
    done = await flow_as(client, HANNAH, flow["id"])
    assert done["status"] == "succeeded"
    second = done["steps"][1]
    assert second["run"]["host_id"] == "alpha" and second["run"]["datasets"] == []
    assert second["source_datasets"] == ["employees"]
    files = await outputs(second["run"]["id"])
    assert {n: f["source_datasets"] for n, f in files.items()} == {
        "pay.csv": ["employees"],
        "conclusion.json": ["employees"],
    }
    assert await drive_view(client, MARIA, files["pay.csv"], second["run"]["id"]) == SEES_NOTHING
    assert await drive_view(client, HANNAH, files["pay.csv"], second["run"]["id"]) == SEES_ALL


async def test_a_conclusion_nested_too_deeply_fails_the_step_over_the_result_upload(client, tmp_path) -> None:
    """Not a 500: the upload is answered, the step failed with the reason, the next one skipped. The
    positive control: a flat conclusion over the same upload is kept."""
    deep = "open('/work/output/conclusion.json', 'w').write('[' * 8000 + ']' * 8000)\n"
    flat = "open('/work/output/conclusion.json', 'w').write('[[1]]')\n"
    worker = await _worker(client, "alpha")
    failing = await _propose_and_approve(client, flow_body(step(deep, ["products"]), step("print(1)", [])))
    filed = await _run_step_on(client, worker, failing["steps"][0]["run"]["id"], tmp_path)
    assert filed.status_code == 200 and filed.json()["status"] == "failed", filed.text
    done = await flow_as(client, HANNAH, failing["id"])
    first, second = (s["run"] for s in done["steps"])
    assert "conclusion.json nests lists and objects more than 64 levels deep" in first["error_message"]
    assert second["status"] == "skipped" and done["status"] == "failed"
    control = await _propose_and_approve(client, flow_body(step(flat, ["products"])))
    filed = await _run_step_on(client, worker, control["steps"][0]["run"]["id"], tmp_path)
    assert filed.status_code == 200 and filed.json()["status"] == "succeeded", filed.text
    assert (await flow_as(client, HANNAH, control["id"]))["steps"][0]["conclusion"] == [[1]]
