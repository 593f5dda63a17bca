"""The worker API, attacked as the parties who must not use it: the assistant's token, a person's session,
another worker's token (a host the run was not dispatched to), a forged or expired signature, a revoked
token. Next to each refusal, the worker that holds the run succeeds. Runs are claimed, requeued, lost and handed out fairly by the database
(PostgreSQL: the fleet's job queue lives there); no VM starts here (tests/fleet/test_workers.py runs them)."""

from __future__ import annotations

import io
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from backend.execution.execute import hash_problem
from backend.fleet import queue as fleet_queue
from backend.fleet import service, transfer
from backend.fleet.tables import WorkerHost
from backend.runs import queued
from backend.runs.tables import Run, RunStatus
from tests.support.fleet import _dispatch, _queued_run, _result_tar, _worker, unpack_in_shared_executor
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = pytest.mark.postgres


async def test_only_a_worker_token_reaches_the_worker_api_and_it_reaches_nothing_else(
    client, alice, acme_on
) -> None:
    run = await _queued_run(client, alice)
    # the assistant's token and a person's session are not worker credentials
    assert (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alice)).status_code == 401
    await login(client, "alice@acme.example")
    assert (await client.post(f"/api/worker/runs/{run['id']}/claim")).status_code == 401
    client.cookies.clear()
    worker = await _worker(client, "alpha")
    assert await _dispatch() == [run["id"]]
    # a worker token is not a person's or the assistant's: the product API refuses it
    assert (await client.get("/api/runs", headers=worker)).status_code == 401
    assert (await client.get(f"/api/runs/{run['id']}", headers=worker)).status_code == 401
    # positive control: the worker claims the run
    claimed = await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["approved_bundle_sha256"] == run["bundle_sha256"]


async def test_a_run_is_claimed_once_and_only_its_holder_fetches_the_bundle(client, alice, acme_on) -> None:
    run = await _queued_run(client, alice, datasets=["deals"])
    alpha, beta = await _worker(client, "alpha"), await _worker(client, "beta")
    assert await _dispatch() == [run["id"]]  # equal free slots: the first host by name, alpha
    job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).json()
    second = await client.post(f"/api/worker/runs/{run['id']}/claim", headers=beta)
    assert second.status_code == 409  # never started twice
    detail = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert detail["status"] == "running" and detail["host_id"] == "alpha"

    # beta, with alpha's URL or with a URL signed for itself, gets nothing: it does not hold the run
    assert (await client.get(job["bundle_url"], headers=beta)).status_code == 403
    own = service.signed_path(run["id"], "beta", "bundle")
    assert (await client.get(own, headers=beta)).status_code == 403
    # alpha with a forged, a wrong-purpose or an expired signature gets nothing either
    forged = job["bundle_url"][:-4] + ("0000" if not job["bundle_url"].endswith("0000") else "1111")
    assert (await client.get(forged, headers=alpha)).status_code == 403
    wrong_purpose = job["result_url"].replace("/result?", "/bundle?")
    assert (await client.get(wrong_purpose, headers=alpha)).status_code == 403
    expires = int(datetime.now(UTC).timestamp()) - 1
    stale = f"/api/worker/runs/{run['id']}/bundle?expires={expires}&sig={service._signature(run['id'], 'alpha', 'bundle', expires)}"
    assert (await client.get(stale, headers=alpha)).status_code == 403
    # the assistant with alpha's signed URL: not a worker
    assert (await client.get(job["bundle_url"], headers=alice)).status_code == 401

    # positive control: alpha fetches it, and what it fetched hashes to the approval
    response = await client.get(job["bundle_url"], headers=alpha)
    assert response.status_code == 200, response.text
    with tarfile.open(fileobj=io.BytesIO(response.content)) as tar:
        names = tar.getnames()
    assert any(n.endswith("manifest.json") for n in names)


async def test_a_revoked_worker_token_is_refused(client, alice, acme_on) -> None:
    run = await _queued_run(client, alice)
    worker = await _worker(client, "alpha")
    token_id = (await service.tokens())[-1]["id"]
    await service.revoke(token_id, actor="test")
    assert (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)).status_code == 401


async def test_a_heartbeat_with_a_forged_or_revoked_token_moves_nothing(client, alice, acme_on) -> None:
    """The heartbeat checks its token inside its one statement (`service._BEAT`), not through `host_for_token`."""
    worker = await _worker(client, "alpha")

    async def beat(headers: dict[str, str], running: int) -> int:
        body = {"running": running, "draining": False, "holding": []}
        return (await client.post("/api/worker/heartbeat", json=body, headers=headers)).status_code

    def host_row():
        return WorkerHost.select(WorkerHost.last_heartbeat, WorkerHost.running).where(
            WorkerHost.host_id == "alpha"
        )

    assert await beat(worker, 1) == 200  # control: the host's own token moves its row
    before = await host_row().first()
    assert before["running"] == 1
    assert await beat({"Authorization": "Bearer cwt_" + "x" * 43}, 2) == 401  # a token never issued
    assert (
        await beat({"Authorization": worker["Authorization"].replace("cwt_", "")}, 2) == 401
    )  # not a worker's
    await service.revoke((await service.tokens())[-1]["id"], actor="test")
    assert await beat(worker, 3) == 401
    assert await host_row().first() == before


async def test_a_bundle_changed_after_approval_is_refused_by_the_worker_check(
    client, alice, acme_on, tmp_path
) -> None:
    run = await _queued_run(client, alice, datasets=["deals"])
    worker = await _worker(client, "alpha")
    await _dispatch()
    job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)).json()
    response = await client.get(job["bundle_url"], headers=worker)
    with tarfile.open(fileobj=io.BytesIO(response.content)) as tar:
        tar.extractall(tmp_path / "b", filter="data")
    assert hash_problem({**job, "bundle_dir": str(tmp_path / "b")}) is None  # positive control: unchanged
    staged = next(p for p in (tmp_path / "b").rglob("*") if p.is_file() and p.name != "manifest.json")
    staged.write_text(staged.read_text() + "\nmallory,1\n")
    assert "changed after approval" in (hash_problem({**job, "bundle_dir": str(tmp_path / "b")}) or "")
    refused = await client.post(
        f"/api/worker/runs/{run['id']}/refuse", json={"problem": "the staged data changed"}, headers=worker
    )
    assert refused.status_code == 200
    detail = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert detail["status"] == "error" and "refused to start" in detail["error_message"]


async def test_a_lost_worker_requeues_what_it_had_not_started_and_ends_what_it_had(
    client, alice, acme_on
) -> None:
    waiting, started = await _queued_run(client, alice), await _queued_run(client, alice)
    worker = await _worker(client, "alpha")
    assert sorted(await _dispatch()) == sorted([waiting["id"], started["id"]])
    for run in (waiting, started):
        assert (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=worker)).status_code == 200
    assert (
        await client.post(f"/api/worker/runs/{started['id']}/vm-started", headers=worker)
    ).status_code == 200
    assert await service.reap() == []  # positive control: a fresh heartbeat is not lost
    old = datetime.now(UTC) - timedelta(seconds=120)
    await WorkerHost.update({WorkerHost.last_heartbeat: old}).where(WorkerHost.host_id == "alpha")
    assert await service.reap() == ["alpha"]
    rows = {r["id"]: r for r in await Run.select().where(Run.id.is_in([waiting["id"], started["id"]]))}
    assert rows[waiting["id"]]["status"] == RunStatus.queued and rows[waiting["id"]]["host_id"] is None
    assert rows[waiting["id"]]["dispatched_to"] is None  # handed out again on the dispatcher's next pass
    assert rows[started["id"]]["status"] == RunStatus.error
    assert "worker lost" in rows[started["id"]]["error_message"]
    assert rows[started["id"]]["credits_charged"] is None  # never charged for a run it did not report
    # the lost worker cannot report on the run any more, nor send heartbeats until it registers again
    assert (await client.post("/api/worker/heartbeat", json={}, headers=worker)).status_code == 409
    assert (
        await client.post(f"/api/worker/runs/{started['id']}/vm-started", headers=worker)
    ).status_code == 403


async def test_a_company_that_queued_later_is_not_stuck_behind_another_companys_line(
    client, alice, acme_on
) -> None:
    await enable_code("Globex")
    gina = await token_for(client, "gina@globex.example")
    a_runs = [await _queued_run(client, alice) for _ in range(10)]
    b_run = (await client.post("/api/runs", json=proposal(), headers=gina)).json()
    assert (await approve_as(client, "gina@globex.example", b_run)).status_code == 200
    client.cookies.clear()
    await _worker(client, "alpha", capacity=2)
    app = fleet_queue.make_app()
    await fleet_queue.ensure_schema(app)
    async with app.open_async():
        order = await fleet_queue.dispatch(app)
        assert len(order) == 2  # the worker's two slots, no more: the rest waits in our queue, not in FIFO
        in_flight = list(order)
        while len(order) < 11:
            # the oldest handed-over run starts and finishes; the freed slot goes to whoever is next in turn
            await Run.update({Run.status: RunStatus.succeeded}).where(Run.id == in_flight.pop(0))
            handed = await fleet_queue.dispatch(app)
            assert handed, "a free slot was not handed on"
            order += handed
            in_flight += handed
    a_ids = [r["id"] for r in a_runs]
    assert order.index(b_run["id"]) < order.index(a_ids[4])  # B's run before A's fifth
    assert sorted(order) == sorted([*a_ids, b_run["id"]])  # each exactly once


async def test_the_holder_reports_a_result_once_and_it_is_filed_like_any_run(
    client, alice, acme_on, tmp_path
) -> None:
    run = await _queued_run(client, alice)
    alpha, beta = await _worker(client, "alpha"), await _worker(client, "beta")
    assert await _dispatch() == [run["id"]]
    job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).json()
    assert (await client.post(f"/api/worker/runs/{run['id']}/vm-started", headers=alpha)).status_code == 200
    body = _result_tar(tmp_path)
    headers = {"Content-Type": "application/x-tar"}
    # another worker, even with a result URL of its own, cannot report on a run it does not hold
    own = service.signed_path(run["id"], "beta", "result")
    assert (await client.post(own, content=body, headers={**beta, **headers})).status_code == 403
    # the holder without the signature cannot either
    bare = f"/api/worker/runs/{run['id']}/result?expires=9999999999&sig=00"
    assert (await client.post(bare, content=body, headers={**alpha, **headers})).status_code == 403
    # positive control: the holder with its signed URL
    filed = await client.post(job["result_url"], content=body, headers={**alpha, **headers})
    assert filed.status_code == 200, filed.text
    assert filed.json()["status"] == "succeeded"
    detail = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert detail["status"] == "succeeded" and detail["host_id"] == "alpha"
    assert [f["name"] for f in detail["output_files"]] == ["total.csv"]
    assert detail["credits_charged"] and detail["credits_charged"] > 0
    row = await Run.select(Run.bundle_dir).where(Run.id == run["id"]).first()
    assert not Path(row["bundle_dir"]).exists()  # the staged copy goes when the run ends
    # the same result again is refused: the run is filed and charged once
    again = await client.post(job["result_url"], content=body, headers={**alpha, **headers})
    assert again.status_code == 403
    audit = [e["action"] for e in (await client.get(f"/api/runs/{run['id']}/audit", headers=alice)).json()]
    assert audit.count("credits.charged") == 1 and audit.count("run.finished") == 1


async def test_in_a_fleet_the_dispatcher_fires_due_schedules_and_hands_their_runs_out(
    client, alice, acme_on
) -> None:
    """The embedded worker fires schedules; in a fleet the API's dispatcher does (positive control: the
    schedule is due only once its next firing time is moved into the past)."""
    import asyncio

    from backend.schedules.tables import Schedule
    from tests.support.http import login

    origin = await _queued_run(client, alice)
    await Run.update({Run.status: RunStatus.succeeded}).where(Run.id == origin["id"])
    await login(client, "alice@acme.example")
    created = await client.post("/api/schedules", json={"run_id": origin["id"], "cron": "0 7 * * *"})
    assert created.status_code == 201, created.text
    client.cookies.clear()
    await _worker(client, "alpha", capacity=1)
    dispatcher = fleet_queue.Dispatcher()
    await dispatcher.start()
    try:
        await asyncio.sleep(1.5)
        assert await Run.count().where(Run.schedule_id == created.json()["id"]) == 0  # not due yet
        past = datetime.now(UTC) - timedelta(minutes=1)
        await Schedule.update({Schedule.next_fire_at: past}).where(Schedule.id == created.json()["id"])
        dispatcher._last_schedules = -1e9  # the next pass looks at schedules (else every 15 s)
        fired: list = []
        for _ in range(100):
            fired = await Run.select(Run.id, Run.dispatched_at).where(Run.schedule_id == created.json()["id"])
            if fired and fired[0]["dispatched_at"] is not None:
                break
            dispatcher._wake.set()
            await asyncio.sleep(0.1)
        assert fired and fired[0]["dispatched_at"] is not None, fired  # fired, queued and handed to a worker
    finally:
        await dispatcher.stop()


async def test_a_run_ending_on_its_host_wakes_the_dispatcher_and_a_request_that_frees_nothing_does_not(
    client, alice, acme_on, tmp_path
) -> None:
    """A host's result frees its slot, and the dispatcher hears it at once (`queued.announce`, which the leading
    API process's dispatcher listens to). Without it the next queued run waited for a new approval or for the
    dispatcher's pass every heartbeat: a fleet with a backlog ran one slot's worth of runs per heartbeat.
    Control: the requests of the same run that free nothing (claim, bundle, VM started, heartbeat) wake nobody,
    so the test would notice the announcement gone from the result and not take any request's for it. The
    hostile side: another host posting a result for the run, with a signed URL of its own, is refused and wakes
    nobody either."""
    run = await _queued_run(client, alice)
    alpha = await _worker(client, "alpha", capacity=1)
    beta = await _worker(client, "beta", capacity=1)
    assert await _dispatch() == [run["id"]]
    heard: list[str] = []
    stop = queued.listen(lambda: heard.append("woken"))
    try:
        job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).json()
        assert (await client.get(job["bundle_url"], headers=alpha)).status_code == 200
        assert (
            await client.post(f"/api/worker/runs/{run['id']}/vm-started", headers=alpha)
        ).status_code == 200
        beat = {"running": 1, "draining": False, "holding": [run["id"]]}
        assert (await client.post("/api/worker/heartbeat", json=beat, headers=alpha)).status_code == 200
        tar, body = {"Content-Type": "application/x-tar"}, _result_tar(tmp_path)
        forged = service.signed_path(run["id"], "beta", "result")
        refused = await client.post(forged, content=body, headers={**beta, **tar})
        assert refused.status_code == 403
        assert heard == []  # nothing was freed yet
        filed = await client.post(job["result_url"], content=body, headers={**alpha, **tar})
        assert filed.status_code == 200, filed.text
        assert heard == ["woken"]
    finally:
        stop()


@pytest.mark.parametrize("own_thread", [True, False], ids=["own-thread", "control-shared-executor"])
async def test_hosts_that_post_their_results_slowly_hold_no_thread_the_api_needs(
    client, alice, acme_on, tmp_path, monkeypatch, own_thread: bool
) -> None:
    """Hosts holding runs post their results to the served worker API (uvicorn on loopback, in this test's
    event loop) and stop mid-stream, more of them than the process's shared executor has threads (one here, as
    the company may run two at once; six on this 2-core machine). The API still gets its other `to_thread`
    work done, and each result is filed once its host goes on. Control: the upload unpacked in the shared
    executor, as it was before, holds every thread while the hosts stall."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    import uvicorn

    runs = [await _queued_run(client, alice) for _ in range(2)]
    alpha = await _worker(client, "alpha", capacity=2)
    assert sorted(await _dispatch()) == sorted(r["id"] for r in runs)
    jobs = []
    for run in runs:
        jobs.append((await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).json())
        assert (
            await client.post(f"/api/worker/runs/{run['id']}/vm-started", headers=alpha)
        ).status_code == 200

    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(executor)
    if not own_thread:
        monkeypatch.setattr(transfer, "unpack_async", unpack_in_shared_executor)

    server = uvicorn.Server(
        uvicorn.Config(client.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    )
    serving = asyncio.ensure_future(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    body = _result_tar(tmp_path)
    go_on = asyncio.Event()

    async def stalling():
        yield body[:700]
        await go_on.wait()  # the host stops sending here
        yield body[700:]

    headers = {**alpha, "Content-Type": "application/x-tar"}
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"host": "testserver.local"}, timeout=30
        ) as live:
            posts = [
                asyncio.ensure_future(live.post(j["result_url"], content=stalling(), headers=headers))
                for j in jobs
            ]
            await asyncio.sleep(0.5)
            try:
                if own_thread:
                    assert await asyncio.wait_for(asyncio.to_thread(lambda: "other work"), 5) == "other work"
                else:
                    with pytest.raises(TimeoutError):
                        await asyncio.wait_for(asyncio.to_thread(lambda: "other work"), 1)
            finally:
                go_on.set()
                filed = await asyncio.wait_for(asyncio.gather(*posts), 30)
    finally:
        server.should_exit = True
        await serving
        executor.shutdown(wait=False)
    assert [f.status_code for f in filed] == [200, 200], [f.text for f in filed]
    for run in runs:
        assert (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()["status"] == "succeeded"
