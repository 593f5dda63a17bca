"""A fleet host's own word moves nothing it should not (security review 2026-12-06, D-L3). Written as a
compromised hypervisor host: it registers saying it runs 256 VMs (to draw most runs, and their bundles), and
it reports a run time of 0 (every run at the base charge) or of days (every run at its full reservation).
The operator's enrollment caps its capacity, the charge is the time on the API's clock from its VM's start to
its result's arrival, and what it says of its VM (virtualization, interfaces) is labelled as its own word.
Controls: a host the operator enrolled for more slots gets them; an honest report is charged the same; the
embedded worker's evidence is labelled as the API's.

PostgreSQL (the fleet's job queue lives there); no VM starts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from backend import clock
from backend.audit.tables import AuditEntry
from backend.credits import service as credits
from backend.fleet import service, transfer
from backend.fleet.tables import WorkerHost
from backend.runs.tables import Run
from backend.sandbox.models import SandboxResult, Timings, VmInfo
from backend.settings import get_settings
from tests.support.console import execute_with_stand_in_vm
from tests.support.fleet import _dispatch, _queued_run
from tests.support.http import login

pytestmark = pytest.mark.postgres

LIMITS = {"wall_seconds": 100, "vcpus": 1, "memory_mib": 1024}
RAN_SECONDS = 30  # by the API's clock, from the VM's start to the result's arrival


async def _enrolled(client, host_id: str, *, enrolled: int, says: int) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {await service.enroll(host_id, created_by='test', capacity=enrolled)}"
    }
    response = await client.post("/api/worker/hosts", json={"capacity": says}, headers=headers)
    assert response.status_code == 200, response.text
    return headers


async def test_a_host_saying_it_runs_256_vms_gets_the_slots_it_was_enrolled_for(
    client, alice, acme_on, monkeypatch
) -> None:
    monkeypatch.setenv("CLEANROOM_COMPANY_CONCURRENCY_CAP", "0")  # only the hosts' slots bound the hand-out
    get_settings.cache_clear()
    await _enrolled(client, "alpha", enrolled=1, says=256)  # the inflated host
    await _enrolled(client, "beta", enrolled=2, says=2)  # control: the operator gave it two
    runs = [(await _queued_run(client, alice, conversation_id=f"c{i}"))["id"] for i in range(5)]
    handed = await _dispatch()
    assert len(handed) == 3, handed  # 1 + 2 slots, not 256 + 2
    rows = await Run.select(Run.dispatched_to).where(Run.id.is_in(runs) & Run.dispatched_to.is_not_null())
    assert sorted(r["dispatched_to"] for r in rows) == ["alpha", "beta", "beta"]
    hosts = {
        h["host_id"]: h["capacity"] for h in await WorkerHost.select(WorkerHost.host_id, WorkerHost.capacity)
    }
    assert hosts == {"alpha": 1, "beta": 2}
    registered = (
        await AuditEntry.select(AuditEntry.data)
        .where((AuditEntry.action == "worker.registered") & (AuditEntry.subject_id == "alpha"))
        .output(load_json=True)
        .first()
    )
    assert registered["data"]["capacity"] == 1 and registered["data"]["capacity_asked"] == 256
    # a host may offer fewer than it was enrolled for (a smaller machine): it is taken at its word there
    await _enrolled(client, "gamma", enrolled=4, says=1)
    assert (await WorkerHost.select(WorkerHost.capacity).where(WorkerHost.host_id == "gamma").first())[
        "capacity"
    ] == 1


async def _file(client, host: dict[str, str], run_id: int, tmp_path: Path, reported_ms: float) -> float:
    """The host claims the run, says its VM started RAN_SECONDS ago by the API's clock, and uploads a result
    that reports `reported_ms` of run time. Returns what the run was charged."""
    assert (await client.post(f"/api/worker/runs/{run_id}/claim", headers=host)).status_code == 200
    assert (await client.post(f"/api/worker/runs/{run_id}/vm-started", headers=host)).status_code == 200
    started = clock.now() - timedelta(seconds=RAN_SECONDS)
    await Run.update({Run.vm_started_at: started}).where(Run.id == run_id)
    out = tmp_path / f"out-{run_id}"
    out.mkdir()
    result = SandboxResult(
        status="succeeded",
        exit_code=0,
        timings_ms=Timings(total=reported_ms),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"]),
    )
    packed = tmp_path / f"result-{run_id}.tar"
    transfer.pack_result(result.model_dump_json().encode(), out, [], packed)
    filed = await client.post(
        service.signed_path(run_id, "alpha", "result"),
        content=packed.read_bytes(),
        headers={**host, "Content-Type": "application/x-tar"},
    )
    assert filed.status_code == 200 and filed.json()["status"] == "succeeded", filed.text
    return (await Run.select(Run.credits_charged).where(Run.id == run_id).first())["credits_charged"]


async def test_the_charge_is_the_api_clocks_time_whatever_the_host_reports(
    client, alice, acme_on, tmp_path, monkeypatch
) -> None:
    host = await _enrolled(client, "alpha", enrolled=1, says=1)
    at_least = credits.price(1, 1024, RAN_SECONDS)[0]
    at_most = credits.price(1, 1024, RAN_SECONDS + 30)[0]  # the request's own time on a slow machine
    reserved = credits.max_cost(LIMITS)
    assert at_least > credits.BASE_CHARGE and at_most < reserved  # the three lie in separate ranges
    charged = {}
    # 0: every run at the base charge; days: every run at its reservation; the control: the truth
    for reported_ms in (0, 10**9, RAN_SECONDS * 1000):
        run = (await _queued_run(client, alice, limits=LIMITS))["id"]
        assert await _dispatch() == [run]
        charged[reported_ms] = await _file(client, host, run, tmp_path, reported_ms)
    for reported_ms, credits_charged in charged.items():
        assert at_least <= credits_charged <= at_most, (reported_ms, credits_charged, at_least, reserved)

    # what the host said of its VM is labelled as its own word: in the pack and in the run's end entry
    await login(client, "alice@acme.example")
    pack = (await client.get(f"/api/runs/{run}/evidence")).json()
    assert pack["isolation"]["vm"]["nics"] == 0
    assert pack["isolation"]["vm_reported_by"] == "fleet host alpha (self-reported: not verified by the API)"
    finished = (
        await AuditEntry.select(AuditEntry.data)
        .where((AuditEntry.action == "run.finished") & (AuditEntry.subject_id == str(run)))
        .output(load_json=True)
        .first()
    )
    assert finished["data"]["vm_self_reported_by"] == "alpha"

    # control: the embedded worker's own sandbox is the API's, and its pack says so
    client.cookies.clear()
    embedded = (await _queued_run(client, alice))["id"]
    await Run.update({Run.dispatched_to: None, Run.dispatched_at: None}).where(Run.id == embedded)
    assert await execute_with_stand_in_vm(embedded, monkeypatch) == "succeeded"
    await login(client, "alice@acme.example")
    pack = (await client.get(f"/api/runs/{embedded}/evidence")).json()
    assert pack["isolation"]["vm_reported_by"] == "the API's embedded worker"
