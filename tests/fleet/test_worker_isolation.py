"""A hypervisor host holds no product credential and takes only what was sent to it (issue 23, N-H2 and the
first low): the workers' database role reaches procrastinate's tables and nothing of the product's; a
worker claims only a run dispatched to its own host; /api/worker exists only in a fleet; `cleanroom worker`
does not send its token over plain http to another machine; a worker's result is re-checked against the
output policies before it is filed. Each refusal sits beside the same thing done by the party allowed to.
No VM starts here (tests/fleet/test_workers.py runs real workers with the role)."""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from backend.fleet import jobs, service, transfer
from backend.fleet import queue as fleet_queue
from backend.fleet.tables import WorkerHost
from backend.runs.tables import Run, RunStatus
from backend.sandbox.models import OutputFile, SandboxResult, Timings
from backend.sandbox.output import STDOUT_MARKER, stdout_cap
from backend.settings import REPO_ROOT, get_settings
from tests.support.fleet import _dispatch, _queued_run, _worker

pytestmark = pytest.mark.postgres
PRODUCT_TABLES = ("run", "login_session", "app_user", "employee", "api_token", "action_item")


@pytest.fixture
def worker_role(client) -> tuple[str, str]:
    """The workers' role on this test's database, made as `cleanroom workers db-role` makes it; dropped
    after (its grants first: a role with privileges cannot be dropped)."""
    url = fleet_queue.database_url()
    role, password = f"w_{uuid.uuid4().hex[:12]}", secrets.token_urlsafe(24)
    yield role, password
    with psycopg.connect(url, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


async def test_the_workers_role_reaches_the_job_queue_and_nothing_of_the_product(
    client, alice, acme_on, worker_role
) -> None:
    role, password = worker_role
    api_url = fleet_queue.database_url()
    made = await fleet_queue.make_worker_role(api_url, "alpha", password, role=role, other_databases=[])
    granted = made.granted
    assert "procrastinate_jobs" in granted and any(g.startswith("procrastinate_fetch_job") for g in granted)
    assert all(g.startswith("procrastinate_") for g in granted), granted
    worker_url = fleet_queue.role_url(api_url, role, password)

    # positive control: the API's role reads and changes every product table
    assert set(PRODUCT_TABLES) <= set(jobs.product_tables_reachable(api_url))
    assert jobs.product_tables_reachable(worker_url) == []
    hostile = [
        *(f'SELECT * FROM "{table}" LIMIT 1' for table in PRODUCT_TABLES),
        "UPDATE run SET code = 'print(1)', status = 'queued'",  # the review's first attack
        'INSERT INTO login_session (token_hash, "user", created_at, expires_at) '
        "VALUES ('x', 1, now(), now() + interval '1 day')",  # the second: a session as anyone
        "DELETE FROM employee",
        "CREATE TABLE run_shadow (id int)",  # nothing of its own in the product's schema either
    ]
    async with await psycopg.AsyncConnection.connect(worker_url, autocommit=True) as conn:
        for statement in hostile:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(statement)
        # what a worker needs: procrastinate's own tables
        assert (await (await conn.execute("SELECT count(*) FROM procrastinate_jobs")).fetchone())[0] >= 0
    async with await psycopg.AsyncConnection.connect(api_url) as conn:  # positive control, the API's role
        assert (await (await conn.execute("SELECT count(*) FROM run")).fetchone())[0] > 0

    # procrastinate runs a job as the workers' role: the API hands a run to alpha's queue, a procrastinate
    # worker logged in as the role fetches it, runs the task and deletes the finished job
    run = await _queued_run(client, alice)
    await _worker(client, "alpha")
    assert await _dispatch() == [run["id"]]
    app = fleet_queue.make_app(worker_url, name="cleanroom-worker-alpha")
    taken: list[int] = []

    @app.task(name=fleet_queue.TASK, queue=fleet_queue.queue_of("alpha"), pass_context=False)
    async def handle(run_id: int) -> None:
        taken.append(run_id)

    async with app.open_async():
        await app.run_worker_async(
            queues=[fleet_queue.queue_of("alpha")],
            wait=False,
            install_signal_handlers=False,
            delete_jobs="successful",
        )
    assert taken == [run["id"]]
    async with await psycopg.AsyncConnection.connect(api_url) as conn:
        left = await (await conn.execute("SELECT count(*) FROM procrastinate_jobs")).fetchone()
    assert left[0] == 0


async def test_the_workers_role_is_made_again_exactly_and_a_public_grant_is_caught(
    client, worker_role
) -> None:
    """Run twice (an upgrade), the role keeps exactly its grants: one given to it by hand in between is
    taken back; a product table granted to PUBLIC is reported instead of ignored."""
    role, password = worker_role
    api_url = fleet_queue.database_url()
    await fleet_queue.make_worker_role(api_url, "alpha", password, role=role, other_databases=[])
    worker_url = fleet_queue.role_url(api_url, role, password)
    with psycopg.connect(api_url, autocommit=True) as admin:
        admin.execute(f'GRANT SELECT ON run TO "{role}"')
    assert jobs.product_tables_reachable(worker_url) == ["run"]  # the check sees a grant
    await fleet_queue.make_worker_role(api_url, "alpha", password, role=role, other_databases=[])
    assert jobs.product_tables_reachable(worker_url) == []
    with psycopg.connect(api_url, autocommit=True) as admin:
        admin.execute("GRANT SELECT ON app_user TO PUBLIC")
    try:
        assert jobs.product_tables_reachable(worker_url) == ["app_user"]
    finally:
        with psycopg.connect(api_url, autocommit=True) as admin:
            admin.execute("REVOKE SELECT ON app_user FROM PUBLIC")


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend", *args],
        env={**os.environ, **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_the_worker_command_refuses_the_apis_database_role_and_db_role_makes_one(
    client, worker_role
) -> None:
    role, password = worker_role
    api_url = fleet_queue.database_url()
    token = await service.enroll("alpha", created_by="test")
    env = {"DATABASE_URL": api_url, "CLEANROOM_WORKER_TOKEN": token, "CLEANROOM_WORKERS": "fleet"}
    refused = _cli("worker", "--host-id", "alpha", "--api", "http://127.0.0.1:9", env=env)
    assert refused.returncode == 1, refused.stderr
    assert "may read or change the product's tables" in refused.stderr and "db-role" in refused.stderr
    # (the cluster's other databases are the test suite's: left as they are)
    made = _cli(
        "workers",
        "db-role",
        "alpha",
        role,
        "--leave-other-databases",
        env={**env, "CLEANROOM_WORKER_DB_PASSWORD": password},
    )
    assert made.returncode == 0, made.stderr
    assert "procrastinate only, host alpha's queue only" in made.stdout and f"{role}:PASSWORD@" in made.stdout
    worker_url = fleet_queue.role_url(api_url, role, password)
    assert jobs.product_tables_reachable(worker_url) == []
    # the role is alpha's: beta's worker refuses it, and a role that may make temporary tables too
    worker_env = {**env, "DATABASE_URL": worker_url}
    with psycopg.connect(api_url, autocommit=True) as admin:
        database = admin.execute("SELECT current_database()").fetchone()[0]
        admin.execute(f'GRANT TEMPORARY ON DATABASE "{database}" TO "{role}"')
    other = _cli("worker", "--host-id", "beta", "--api", "http://127.0.0.1:9", env=worker_env)
    assert other.returncode == 1, other.stderr
    assert "not limited to this host's queue runs.beta" in other.stderr, other.stderr
    assert "temporary tables (TEMP)" in other.stderr, other.stderr
    with psycopg.connect(api_url, autocommit=True) as admin:
        admin.execute(f'REVOKE TEMPORARY ON DATABASE "{database}" FROM "{role}"')
    # positive control: the role as made is alpha's own, with nothing to object to (the same check)
    assert jobs.worker_role_problems(worker_url, "alpha")[0] == []
    assert jobs.worker_role_problems(worker_url, "beta")[0] == [
        "its jobs are not limited to this host's queue runs.beta"
    ]
    short = _cli("workers", "db-role", "alpha", role, env={**env, "CLEANROOM_WORKER_DB_PASSWORD": "short"})
    assert short.returncode == 1 and "at least 16" in short.stderr


async def test_a_worker_claims_only_a_run_dispatched_to_its_own_host(client, alice, acme_on) -> None:
    sent, kept = await _queued_run(client, alice), await _queued_run(client, alice)
    alpha = await _worker(client, "alpha", capacity=1)
    assert await _dispatch() == [sent["id"]]  # alpha's one slot; `kept` waits for a free one
    beta = await _worker(client, "beta", capacity=1)
    row = await Run.select(Run.dispatched_to).where(Run.id == sent["id"]).first()
    assert row["dispatched_to"] == "alpha"
    async with await psycopg.AsyncConnection.connect(fleet_queue.database_url()) as conn:
        jobs = await (await conn.execute("SELECT queue_name, args FROM procrastinate_jobs")).fetchall()
    assert jobs == [("runs.alpha", {"run_id": sent["id"]})]  # only alpha's worker listens there

    # beta, a valid worker token, takes neither the run sent to alpha nor one sent nowhere yet
    for run in (sent, kept):
        refused = await client.post(f"/api/worker/runs/{run['id']}/claim", headers=beta)
        assert refused.status_code == 403, refused.text
        assert "not dispatched to this host" in refused.json()["detail"]
    rows = {r["id"]: r for r in await Run.select().where(Run.id.is_in([sent["id"], kept["id"]]))}
    assert rows[sent["id"]]["status"] == RunStatus.queued and rows[sent["id"]]["host_id"] is None
    assert rows[kept["id"]]["dispatched_at"] is None
    # alpha cannot take the one not sent to it either
    refused = await client.post(f"/api/worker/runs/{kept['id']}/claim", headers=alpha)
    assert refused.status_code == 403
    # positive control: alpha claims what was sent to it
    claimed = await client.post(f"/api/worker/runs/{sent['id']}/claim", headers=alpha)
    assert claimed.status_code == 200, claimed.text
    # and the next pass sends `kept` to beta, whose claim then works
    assert await _dispatch() == [kept["id"]]
    assert (await client.post(f"/api/worker/runs/{kept['id']}/claim", headers=beta)).status_code == 200


async def test_a_run_not_claimed_where_it_was_sent_is_sent_again_and_the_old_job_refused(
    client, alice, acme_on
) -> None:
    from datetime import UTC, datetime, timedelta

    run = await _queued_run(client, alice)
    alpha = await _worker(client, "alpha", capacity=1)
    assert await _dispatch() == [run["id"]]
    assert (await client.post("/api/worker/leave", headers=alpha)).status_code == 200  # before claiming
    row = await Run.select(Run.dispatched_at, Run.dispatched_to).where(Run.id == run["id"]).first()
    assert row == {"dispatched_at": None, "dispatched_to": None}
    beta = await _worker(client, "beta", capacity=1)
    assert await _dispatch() == [run["id"]]
    alpha = await _worker(client, "alpha", capacity=1)  # back: its old job cancelled, a late claim refused
    assert (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).status_code == 403
    assert (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=beta)).status_code == 200

    # a job lost on the way (the host is up but never claims): handed out again after worker_claim_seconds
    late = await _queued_run(client, alice)
    await WorkerHost.update({WorkerHost.capacity: 2}).where(WorkerHost.host_id == "beta")
    handed = await _dispatch()
    assert handed == [late["id"]]
    assert await service.reap() == []  # positive control: a fresh dispatch stays where it was sent
    assert (await Run.select(Run.dispatched_at).where(Run.id == late["id"]).first())["dispatched_at"]
    old = datetime.now(UTC) - timedelta(seconds=get_settings().worker_claim_seconds + 5)
    await Run.update({Run.dispatched_at: old}).where(Run.id == late["id"])
    await service.reap()
    row = await Run.select(Run.dispatched_at, Run.dispatched_to).where(Run.id == late["id"]).first()
    assert row == {"dispatched_at": None, "dispatched_to": None}


async def test_the_worker_api_exists_only_in_a_fleet(client, demo_db: str, monkeypatch) -> None:
    from litestar.testing import AsyncTestClient

    from backend.app import create_app

    token = await service.enroll("alpha", created_by="test")
    headers = {"Authorization": f"Bearer {token}"}
    # positive control: the fleet's API (this directory's `client`) answers the worker
    registered = await client.post("/api/worker/hosts", json={"capacity": 1}, headers=headers)
    assert registered.status_code == 200, registered.text
    monkeypatch.setenv("CLEANROOM_WORKERS", "in_process")
    get_settings.cache_clear()
    try:
        app = create_app(database_url=demo_db, run_hooks=False, pool=False)
        async with AsyncTestClient(app=app) as embedded:
            for method, path in (
                ("POST", "/api/worker/hosts"),
                ("POST", "/api/worker/heartbeat"),
                ("POST", "/api/worker/runs/1/claim"),
                ("GET", "/api/worker/runs/1/bundle?expires=1&sig=x"),
            ):
                response = await embedded.request(method, path, json={}, headers=headers)
                assert response.status_code == 404, (method, path, response.status_code)
            assert (await embedded.get("/api/health")).status_code == 200  # the app itself answers
            paths = (await embedded.get("/schema/openapi.json")).json()["paths"]
            assert not [p for p in paths if p.startswith("/api/worker")]
    finally:
        monkeypatch.setenv("CLEANROOM_WORKERS", "fleet")
        get_settings.cache_clear()


def test_the_worker_sends_its_token_over_plain_http_only_to_this_host_or_when_told() -> None:
    from backend.cli.worker import api_url_problem

    for url in ("http://10.0.0.5:8000", "http://api.example.com", "http://[2001:db8::1]:8000"):
        problem = api_url_problem(url, insecure=False)
        assert problem and "--insecure" in problem and "https" in problem, url
        assert api_url_problem(url, insecure=True) is None
    for url in (
        "https://api.example.com",
        "http://127.0.0.1:8000",
        "http://localhost:8000",
        "http://[::1]:8",
    ):
        assert api_url_problem(url, insecure=False) is None, url
    assert api_url_problem("ftp://api.example.com", insecure=True)

    env = {"CLEANROOM_WORKER_TOKEN": "cwt_test", "DATABASE_URL": "sqlite:////nonexistent/x.sqlite3"}
    refused = _cli("worker", "--host-id", "alpha", "--api", "http://10.0.0.5:8000", env=env)
    assert refused.returncode == 1 and "--insecure" in refused.stderr, refused.stderr
    # positive control: with --insecure the URL passes, and the next check speaks (this is no fleet)
    allowed = _cli("worker", "--host-id", "alpha", "--api", "http://10.0.0.5:8000", "--insecure", env=env)
    assert allowed.returncode == 1 and "needs PostgreSQL" in allowed.stderr, allowed.stderr
    assert "--insecure" not in allowed.stderr


async def _report(client, job, headers, result: SandboxResult, out: Path, names: list[str], tmp: Path):
    packed = tmp / "result.tar"
    transfer.pack_result(result.model_dump_json().encode(), out, names, packed)
    return await client.post(
        job["result_url"],
        content=packed.read_bytes(),
        headers={**headers, "Content-Type": "application/x-tar"},
    )


async def test_a_worker_result_is_rechecked_before_it_is_filed(client, alice, acme_on, tmp_path) -> None:
    run = await _queued_run(client, alice)
    alpha = await _worker(client, "alpha")
    await _dispatch()
    job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).json()
    assert (await client.post(f"/api/worker/runs/{run['id']}/vm-started", headers=alpha)).status_code == 200
    out = tmp_path / "out"
    out.mkdir()
    content = b"region,amount\nnorth,5\n"
    (out / "total.csv").write_bytes(content)
    cap = stdout_cap()
    lying = SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout="x" * (cap + 50_000),  # never cut by the worker
        stderr="e" * (cap + 10),
        files=[
            OutputFile(name="/etc/passwd", size=10, sha256="0" * 64),  # a path on the API's host
            OutputFile(name="../x", size=1, sha256="0" * 64),
            OutputFile(name="missing.txt", size=1, sha256="0" * 64),  # listed, never sent
            OutputFile(name="total.csv", size=5, sha256="0" * 64),  # sent, with a made-up size and hash
            OutputFile(name="total.csv", size=5, sha256="0" * 64),
        ],
        actions=[{"op": "create", "dataset": "tasks", "changes": {"title": "x"}}]
        * (get_settings().max_actions_per_run + 1),
        error="E" * 100_000,
        timings_ms=Timings(total=1500.0),
    )
    filed = await _report(client, job, alpha, lying, out, ["total.csv"], tmp_path)
    assert filed.status_code == 200, filed.text
    detail = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert detail["status"] == "succeeded"
    # the one file that is what it says, measured here; the rest listed as rejected, none read
    assert [(f["name"], f["sha256"]) for f in detail["output_files"]] == [
        ("total.csv", hashlib.sha256(content).hexdigest())
    ]
    stored = detail["result"]
    assert [f["size"] for f in stored["files"]] == [len(content)]
    reasons = {r["name"]: r["reason"] for r in stored["rejected_files"]}
    assert reasons["/etc/passwd"] == reasons["../x"] == "unsafe or duplicate name"
    assert reasons["missing.txt"] == "not in the result"
    assert "at most" in reasons["actions.json"]
    # printed output capped as the in-process runner caps it, the marker once
    marker = STDOUT_MARKER.format(cap=cap)
    assert stored["stdout"] == "x" * cap + marker and stored["stdout_truncated"] is True
    assert len(stored["stderr"].encode()) < cap + 200 and stored["stderr"].startswith("e" * cap)
    assert len(stored["error"]) <= 2000
    assert detail["action_items_count"] == 0  # the over-long actions.json became no item


async def test_a_normal_worker_result_is_filed_as_it_came(client, alice, acme_on, tmp_path) -> None:
    """Positive control of the re-check: an honest result (its output already capped by the worker, one
    file, one action) is filed unchanged: the marker is not doubled, the action becomes an item."""
    from backend.sandbox.output import cap_stream

    run = await _queued_run(client, alice)
    alpha = await _worker(client, "alpha")
    await _dispatch()
    job = (await client.post(f"/api/worker/runs/{run['id']}/claim", headers=alpha)).json()
    assert (await client.post(f"/api/worker/runs/{run['id']}/vm-started", headers=alpha)).status_code == 200
    out = tmp_path / "out"
    out.mkdir()
    content = b"region,amount\nnorth,5\n"
    (out / "total.csv").write_bytes(content)
    deal = (await client.get("/api/records/deals", headers=alice)).json()["items"][0]  # one alice sees
    stdout, truncated = cap_stream(b"y" * (stdout_cap() + 3), stdout_cap())
    honest = SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout=stdout,
        stdout_truncated=truncated,
        files=[OutputFile(name="total.csv", size=len(content), sha256=hashlib.sha256(content).hexdigest())],
        actions=[
            {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 90}}
        ],
        timings_ms=Timings(total=1500.0),
    )
    filed = await _report(client, job, alpha, honest, out, ["total.csv"], tmp_path)
    assert filed.status_code == 200, filed.text
    detail = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert [f["name"] for f in detail["output_files"]] == ["total.csv"]
    assert detail["result"]["stdout"] == stdout and detail["result"]["stdout"].count("[output truncated") == 1
    assert detail["result"]["rejected_files"] == []
    assert detail["action_items_count"] == 1, detail.get("actions_note")
