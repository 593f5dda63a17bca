"""How many SQL statements a fleet host's hot requests cost (issue 30): the heartbeat every host sends every
5 s, the claim of a run dispatched to it, the bundle fetch, the VM's start and the result upload. Counted
through the engine's one entry for every query (tests/queries.py), the worker token's check included, and
pinned; the controls show the counter sees a query added to the route.

Before (main at fb1db7d): bundle 2 (the whole run row read), VM start 6 (the whole run read to check the
holder, the conditional UPDATE, the company read apart), result with one output file 22 (the holder's run
read whole twice, the charge and the sources two UPDATEs, the output folder read again for every file)."""

from __future__ import annotations

import pytest

from backend.fleet import service
from backend.runs.tables import Run
from backend.tenancy.tables import Company
from tests.fleet.test_worker_api import _dispatch, _queued_run, _result_tar, _worker
from tests.queries import counted

pytestmark = pytest.mark.postgres

HEARTBEAT = 1  # one statement: the worker token, the host's row updated, the runs it holds by the database
CLAIM = 3  # the worker token; the run queued → running for it while its host is not lost; its job
BUNDLE = 2  # the worker token; the run's holder, status and bundle folder (was the whole row)
VM_STARTED = 4  # the worker token; vm_started_at set while this host holds it, returning its company; entry 2
# (one output file): the worker token; whether it holds the run (before a byte is read); the whole run once
# the upload is in; the charge 5 (the company locked, charged already?, the charge, its entry 2); its charge and
# sources on the run 1; the requester's context 2; the output folder 1; per output file 4 (the file, its
# entry 2, the file read back); the end 3 (the run, its entry 2); whether it is a flow's step 1
RESULT = 20


def _said(queries: list[str]) -> str:
    return "\n".join(q.strip().replace("\n", " ")[:160] for q in queries)


async def test_a_heartbeat_and_a_claim_cost_what_is_pinned(client, alice, acme_on, monkeypatch) -> None:
    run = await _queued_run(client, alice)
    worker = await _worker(client, "alpha")  # registering wrote the token's last_used_at: not counted below
    assert await _dispatch() == [run["id"]]
    with counted(monkeypatch) as queries:
        r = await client.post(
            "/api/worker/heartbeat", json={"running": 0, "draining": False, "holding": []}, headers=worker
        )
    assert r.status_code == 200, r.text
    assert len(queries) == HEARTBEAT, _said(queries)
    with counted(monkeypatch) as queries:
        r = await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)
    assert r.status_code == 200, r.text
    assert len(queries) == CLAIM, _said(queries)


async def _claimed(client, alice) -> tuple[dict, dict[str, str]]:
    run = await _queued_run(client, alice, datasets=["deals"])
    worker = await _worker(client, "alpha")
    assert await _dispatch() == [run["id"]]
    job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)).json()
    return job, worker


async def test_a_bundle_fetch_the_vm_start_and_a_result_cost_what_is_pinned(
    client, alice, acme_on, monkeypatch, tmp_path
) -> None:
    job, worker = await _claimed(client, alice)
    run_id = job["run_id"]
    with counted(monkeypatch) as queries:
        r = await client.get(job["bundle_url"], headers=worker)
    assert r.status_code == 200 and r.content, r.text
    assert len(queries) == BUNDLE, _said(queries)
    with counted(monkeypatch) as queries:
        r = await client.post(f"/api/worker/runs/{run_id}/vm-started", headers=worker)
    assert r.status_code == 200, r.text
    assert len(queries) == VM_STARTED, _said(queries)
    # the conditions moved into the UPDATE still refuse: a second start, and a host that does not hold it
    assert (await client.post(f"/api/worker/runs/{run_id}/vm-started", headers=worker)).status_code == 409
    beta = await _worker(client, "beta")
    assert (await client.post(f"/api/worker/runs/{run_id}/vm-started", headers=beta)).status_code == 403
    with counted(monkeypatch) as queries:
        r = await client.post(
            job["result_url"],
            content=_result_tar(tmp_path),
            headers={**worker, "Content-Type": "application/x-tar"},
        )
    assert r.status_code == 200 and r.json()["status"] == "succeeded", r.text
    assert len(queries) == RESULT, _said(queries)
    row = (
        await Run.select(Run.credits_charged, Run.source_datasets, Run.vm_started_at)
        .where(Run.id == run_id)
        .output(load_json=True)
        .first()
    )
    assert row["credits_charged"] and row["source_datasets"] == ["deals"] and row["vm_started_at"] is not None


async def test_control_the_count_sees_a_query_added_to_the_bundle_the_vm_start_and_the_result(
    client, alice, acme_on, monkeypatch, tmp_path
) -> None:
    job, worker = await _claimed(client, alice)
    run_id = job["run_id"]

    def one_more(real):
        async def patched(*args, **kwargs):
            await Company.count()
            return await real(*args, **kwargs)

        return patched

    with counted(monkeypatch) as queries, monkeypatch.context() as patch:
        patch.setattr(service, "held_run", one_more(service.held_run))
        r = await client.get(job["bundle_url"], headers=worker)
    assert r.status_code == 200, r.text
    assert len(queries) == BUNDLE + 1, _said(queries)
    with counted(monkeypatch) as queries, monkeypatch.context() as patch:
        patch.setattr(service, "vm_started", one_more(service.vm_started))
        r = await client.post(f"/api/worker/runs/{run_id}/vm-started", headers=worker)
    assert r.status_code == 200, r.text
    assert len(queries) == VM_STARTED + 1, _said(queries)
    with counted(monkeypatch) as queries, monkeypatch.context() as patch:
        patch.setattr(service, "record", one_more(service.record))
        r = await client.post(
            job["result_url"],
            content=_result_tar(tmp_path),
            headers={**worker, "Content-Type": "application/x-tar"},
        )
    assert r.status_code == 200, r.text
    assert len(queries) == RESULT + 1, _said(queries)


async def test_control_the_count_sees_a_query_added_to_the_heartbeat(
    client, alice, acme_on, monkeypatch
) -> None:
    worker = await _worker(client, "alpha")
    real = service.heartbeat

    async def one_more(*args, **kwargs):
        await Company.count()
        return await real(*args, **kwargs)

    with counted(monkeypatch) as queries:
        monkeypatch.setattr(service, "heartbeat", one_more)
        r = await client.post(
            "/api/worker/heartbeat", json={"running": 0, "draining": False, "holding": []}, headers=worker
        )
    assert r.status_code == 200, r.text
    assert len(queries) == HEARTBEAT + 1, _said(queries)
