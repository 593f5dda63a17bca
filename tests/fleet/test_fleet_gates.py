"""The kill switch stops a fleet too (security review 2026-12-06, D-M3). Written as the party the switch is
turned against: an admin turns code execution (or the assistant's write ability) off, or the pool runs dry,
while runs wait on a fleet host's queue and a flow is on its first step there. The host's claim re-checks the
gates (the embedded worker's rule, `gates.gate_problem`) and ends the run `cancelled`, audited; a flow whose
running step finishes after the switch went off queues nothing more, and its waiting steps end. Beside each:
the embedded worker refusing the same run (the control the fleet must match), and the switch left on (the
run is claimed, the next step queued).

PostgreSQL (the fleet's job queue lives there); no VM starts: the host's side is driven over the worker API,
its result a small tar (tests/fleet/test_worker_api.py's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from backend import execution, sandbox
from backend.audit.tables import AuditEntry
from backend.credits import service as credits
from backend.fleet import service
from backend.flows.tables import Flow
from backend.runs import gates
from backend.runs.tables import Run, RunStatus
from backend.sandbox.models import SandboxResult, Timings
from backend.tenancy.tables import Company
from tests.support.fleet import _dispatch, _queued_run, _result_tar, _worker
from tests.support.flows import approve_flow_as, flow_body, step
from tests.support.http import login

pytestmark = pytest.mark.postgres

ACME = "Acme Analytics"
GATES = {  # how each gate is closed behind the queue's back, and the words the run ends with
    "code_execution_enabled": ({"code_execution_enabled": False}, gates.CODE_EXECUTION_OFF),
    "assistant_write_enabled": ({"assistant_write_enabled": False}, gates.ASSISTANT_WRITE_OFF),
    "credits": ({"credit_pool": 0}, "credit pool is used up"),
}


async def _set(**values: Any) -> None:
    await Company.update({getattr(Company, k): v for k, v in values.items()}).where(Company.name == ACME)


async def _open_all() -> None:
    acme = (await Company.select(Company.id).where(Company.name == ACME).first())["id"]
    pool = int(await credits.used(acme)) + 1000
    await _set(code_execution_enabled=True, assistant_write_enabled=True, credit_pool=pool)


async def _actions(run_id: int) -> list[str]:
    rows = await AuditEntry.select(AuditEntry.action).where(
        (AuditEntry.subject_type == "run") & (AuditEntry.subject_id == str(run_id))
    )
    return [r["action"] for r in rows]


async def test_a_host_claiming_after_a_gate_closed_ends_the_run_cancelled_as_the_embedded_worker_does(
    client, alice, acme_on, monkeypatch
) -> None:
    """Each gate closed behind the queue's back (the settings endpoint would cancel the queued run at once;
    here the run is already on the host's queue when the gate closes, as after a pool is overdrawn, or a
    switch flipped by another API process whose cancelling has not reached the run yet). The switches are a
    condition of the claim's own statement; the pool is checked right after it, before the job is answered."""
    host = await _worker(client, "alpha", capacity=4)
    started: list[str] = []
    monkeypatch.setattr(sandbox, "run_code", lambda code, **_: started.append(code))  # never reached
    for gate, (closed, reason) in GATES.items():
        await _open_all()
        fleet_run = (await _queued_run(client, alice))["id"]
        embedded_run = (await _queued_run(client, alice))["id"]
        assert set(await _dispatch()) >= {fleet_run}
        await _set(**closed)

        claim = await client.post(f"/api/worker/runs/{fleet_run}/claim", headers=host)
        assert claim.status_code == 409, (gate, claim.text)
        assert claim.json()["error"] == "run_cancelled" and reason in claim.json()["detail"]
        row = await Run.select().where(Run.id == fleet_run).first()
        assert row["status"] == RunStatus.cancelled and row["vm_started_at"] is None, gate
        assert (
            row["error_message"].startswith("cancelled before it started: ")
            and reason in row["error_message"]
        )
        assert not Path(row["bundle_dir"]).exists()
        actions = await _actions(fleet_run)
        assert actions.count("run.cancelled") == 1 and "run.started" not in actions, (gate, actions)
        # the run stays ended: a second claim of it is refused as for any ended run
        again = await client.post(f"/api/worker/runs/{fleet_run}/claim", headers=host)
        assert again.status_code == 409 and again.json()["error"] == "conflict"

        # the embedded worker's refusal of the same kind of run: the one rule, the same end
        await Run.update({Run.dispatched_to: None, Run.dispatched_at: None}).where(Run.id == embedded_run)
        assert await execution.execute(embedded_run) == "cancelled"
        embedded = await Run.select(Run.error_message).where(Run.id == embedded_run).first()
        assert embedded["error_message"] == row["error_message"], gate
    assert started == []

    # positive control: every gate open, the host claims the run and gets its job
    await _open_all()
    run = (await _queued_run(client, alice))["id"]
    assert await _dispatch() == [run]
    claim = await client.post(f"/api/worker/runs/{run}/claim", headers=host)
    assert claim.status_code == 200, claim.text
    assert (await Run.select(Run.status).where(Run.id == run).first())["status"] == RunStatus.running


async def _flow_on_host(client, host: dict[str, str]) -> tuple[int, list[int]]:
    """Alice's assistant proposes a three-step flow, Alice approves it, its first step is handed to host
    `alpha`, which claims it and starts its VM. Returns the flow and its steps' runs."""
    token = await client.post(
        "/api/flows", json=flow_body(step(), step(), step()), headers=await _alice(client)
    )
    assert token.status_code == 201, token.text
    flow = token.json()
    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    client.cookies.clear()
    runs = [s["run"]["id"] for s in flow["steps"]]
    assert await _dispatch() == [runs[0]]
    claim = await client.post(f"/api/worker/runs/{runs[0]}/claim", headers=host)
    assert claim.status_code == 200, claim.text
    assert (await client.post(f"/api/worker/runs/{runs[0]}/vm-started", headers=host)).status_code == 200
    return flow["id"], runs


async def _alice(client) -> dict[str, str]:
    from tests.support.http import token_for

    return await token_for(client, "alice@acme.example")


async def _step_one_finishes(client, host: dict[str, str], run_id: int, tmp_path: Path) -> None:
    """The host uploads step 1's result with its signed URL (the one its job carried)."""
    filed = await client.post(
        service.signed_path(run_id, "alpha", "result"),
        content=_result_tar(tmp_path),
        headers={**host, "Content-Type": "application/x-tar"},
    )
    assert filed.status_code == 200 and filed.json()["status"] == "succeeded", filed.text


async def _statuses(runs: list[int]) -> list[str]:
    rows = await Run.select(Run.id, Run.status).where(Run.id.is_in(runs))
    by_id = {r["id"]: r["status"] for r in rows}
    return [by_id[r] for r in runs]


@pytest.mark.parametrize("how", ["settings", "behind_the_queue"])
async def test_a_flow_whose_step_ends_after_the_switch_went_off_queues_nothing_more(
    client, acme_on, tmp_path, how: str
) -> None:
    """`settings`: the admin turns code execution off in Settings while step 1 runs on the host; the switch
    ends the waiting steps (`cancel_queued`). `behind_the_queue`: the switch goes off without its cancelling
    (another API process, a row changed by hand): step 1's end finds it off (`step_ended`) and queues
    nothing. Either way steps 2 and 3 never start, and the flow ends failed once step 1 is filed."""
    host = await _worker(client, "alpha")
    flow_id, runs = await _flow_on_host(client, host)
    if how == "settings":
        await login(client, "admin@acme.example")
        r = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
        assert r.status_code == 200, r.text
        client.cookies.clear()
        assert await _statuses(runs) == ["running", "cancelled", "skipped"]  # the waiting steps end now
        flow = await Flow.select(Flow.status).where(Flow.id == flow_id).first()
        assert flow["status"] == "running"  # step 1 is still on the host: its end ends the flow
    else:
        await _set(code_execution_enabled=False)
    await _step_one_finishes(client, host, runs[0], tmp_path)

    assert await _statuses(runs) == ["succeeded", "cancelled", "skipped"]  # nothing queued for any host
    second = await Run.select(Run.error_message, Run.bundle_dir).where(Run.id == runs[1]).first()
    assert second["error_message"] == f"cancelled before it started: {gates.CODE_EXECUTION_OFF}"
    assert not Path(second["bundle_dir"]).exists()
    assert (await _actions(runs[1])).count("run.cancelled") == 1
    flow = await Flow.select(Flow.status).where(Flow.id == flow_id).first()
    assert flow["status"] == "failed"


async def test_control_a_flow_whose_switch_stays_on_queues_its_next_step(client, acme_on, tmp_path) -> None:
    host = await _worker(client, "alpha")
    flow_id, runs = await _flow_on_host(client, host)
    await _step_one_finishes(client, host, runs[0], tmp_path)
    assert await _statuses(runs) == ["succeeded", "queued", "waiting"]
    assert await _dispatch() == [runs[1]]
    flow = await Flow.select(Flow.status).where(Flow.id == flow_id).first()
    assert flow["status"] == "running"


async def test_embedded_control_a_flow_step_ending_after_the_switch_went_off_queues_nothing_more(
    client, acme_on, demo_db, monkeypatch
) -> None:
    """The same flow on the embedded worker: its step 1 runs while the switch goes off behind the queue's
    back; the same `step_ended` rule cancels step 2 and skips step 3 (before, step 2 was queued and only
    its own start refused it; a fleet host's claim did not)."""
    flow = (
        await client.post("/api/flows", json=flow_body(step(), step(), step()), headers=await _alice(client))
    ).json()
    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    client.cookies.clear()
    runs = [s["run"]["id"] for s in flow["steps"]]

    def step_one(code: str, **_: Any) -> SandboxResult:
        with psycopg.connect(demo_db) as conn:  # the switch goes off while the VM runs (another connection)
            conn.execute("UPDATE company SET code_execution_enabled = false WHERE name = %s", (ACME,))
        return SandboxResult(status="succeeded", exit_code=0, timings_ms=Timings(total=100))

    monkeypatch.setattr(sandbox, "run_code", step_one)
    assert await execution.execute(runs[0]) == "succeeded"
    assert await _statuses(runs) == ["succeeded", "cancelled", "skipped"]
    assert (await Flow.select(Flow.status).where(Flow.id == flow["id"]).first())["status"] == "failed"
