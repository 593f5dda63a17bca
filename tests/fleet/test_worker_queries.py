"""How many SQL statements a fleet host's hot requests cost (issue 30): the heartbeat every host sends every
5 s, the claim of a run dispatched to it, the bundle fetch, the VM's start and the result upload. Counted
through the engine's one entry for every query (tests/support/queries.py), the worker token's check included, and
pinned; the controls show the counter sees a query added to the route.

Before (main at fb1db7d): bundle 2 (the whole run row read), VM start 6 (the whole run read to check the
holder, the conditional UPDATE, the company read apart), result with one output file 22 (the holder's run
read whole twice, the charge and the sources two UPDATEs, the output folder read again for every file)."""

from __future__ import annotations

import pytest

from backend.fleet import queue as fleet_queue
from backend.fleet import service
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.tenancy.tables import Company
from tests.support.fleet import _dispatch, _queued_run, _result_tar, _worker
from tests.support.queries import counted

pytestmark = pytest.mark.postgres

HEARTBEAT = 1  # one statement: the worker token, the host's row updated, the runs it holds by the database
CLAIM = 4  # the worker token; the run queued → running for it while its host is not lost and its company's
# switches are on; the pool's gate (2026-12-06, D-M3: the embedded worker's start-time check, at the claim); its job
BUNDLE = 2  # the worker token; the run's holder, status and bundle folder (was the whole row)
VM_STARTED = 5  # the worker token; vm_started_at set while this host holds it, returning its company; entry 3
# (an audit entry on PostgreSQL: the chain's lock, its tail, the insert; the lock was added on
# 2026-12-05, so that the appends of several API processes take turns instead of colliding)
# (one output file): the worker token; whether it holds the run (before a byte is read); the whole run once
# the upload is in; the charge 6 (the run's charges locked, charged already?, the charge, its entry 3); its charge and
# sources on the run 1; the requester's context 2; the output folder 1; per output file 5 (the file, its
# entry 3, the file read back); the end 4 (the run, its entry 3); whether it is a flow's step 1
RESULT = 23


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


async def _counted_pass(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], int]:
    """One dispatcher pass, and the statements it sent: the product's (through the engine) and the job
    queue's (through procrastinate's connector)."""
    app = fleet_queue.make_app()
    await fleet_queue.ensure_schema(app)
    async with app.open_async():
        sent: list[str] = []
        with monkeypatch.context() as patch:
            for name in ("execute_query_async", "execute_query_one_async", "execute_query_all_async"):
                real = getattr(app.connector, name)

                def counting(real=real):
                    async def call(query, **arguments):
                        sent.append(query)
                        return await real(query, **arguments)

                    return call

                patch.setattr(app.connector, name, counting())
            with counted(monkeypatch) as queries:
                handed = await fleet_queue.dispatch(app)
    return handed, len(queries) + len(sent)


async def _one_then_five(client, alice, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    monkeypatch.setenv("CLEANROOM_COMPANY_CONCURRENCY_CAP", "0")  # one company's six runs all go
    get_settings.cache_clear()
    await _worker(client, "alpha", capacity=3)
    await _worker(client, "beta", capacity=3)
    one = [(await _queued_run(client, alice))["id"]]
    handed, cost_of_one = await _counted_pass(monkeypatch)
    assert handed == one
    five = [(await _queued_run(client, alice, conversation_id=f"c{i}"))["id"] for i in range(5)]
    handed, cost_of_five = await _counted_pass(monkeypatch)
    assert sorted(handed) == five
    return cost_of_one, cost_of_five


async def test_a_dispatcher_pass_costs_as_much_for_five_runs_as_for_one(
    client, alice, acme_on, monkeypatch
) -> None:
    """The dispatcher passes at every result in a fleet, and a pass is serial: its length bounded how fast
    freed slots filled (issue 30; before 2026-12-05 each run handed out cost three more statements, its jobs
    looked up, its mark, its job's insert). Now the jobs of the queue's head are read in one query, the runs
    marked in one update and their jobs inserted in one statement."""
    cost_of_one, cost_of_five = await _one_then_five(client, alice, monkeypatch)
    assert cost_of_five == cost_of_one


async def test_control_a_pass_that_looks_up_each_runs_jobs_costs_more_for_five(
    client, alice, acme_on, monkeypatch
) -> None:
    """Control: the jobs looked up run by run, as before, and the comparison above notices."""
    real = fleet_queue._live_jobs

    async def run_by_run(app, run_ids):
        jobs = {}
        for run_id in run_ids:
            jobs.update(await real(app, [run_id]))
        return jobs

    monkeypatch.setattr(fleet_queue, "_live_jobs", run_by_run)
    cost_of_one, cost_of_five = await _one_then_five(client, alice, monkeypatch)
    assert cost_of_five == cost_of_one + 4
