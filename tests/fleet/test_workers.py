"""A fleet on this machine: the real API (`cleanroom serve`, CLEANROOM_WORKERS=fleet) on a fresh PostgreSQL
database and real `cleanroom worker` processes with their own data directories (no shared filesystem) and
the workers' database role (procrastinate's tables only: `cleanroom workers db-role`), running real VMs.
Runs spread over the workers and each runs once; a worker killed with SIGKILL is noticed by its missing
heartbeat, and no domain of it is left once it restarts."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from backend.benches import sales_csv
from backend.benches.service import _Session
from backend.benches.workers import FleetServer, wait_finished
from backend.sandbox import libvirt_conn
from tests.support.databases import POSTGRES_URL

pytestmark = [pytest.mark.vm, pytest.mark.postgres]
LOST_SECONDS = 8


@pytest.fixture
def fleet(_factories) -> Iterator[tuple[FleetServer, _Session]]:
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (scripts/test sets CLEANROOM_TEST_POSTGRES_URL)")
    env = {
        "CLEANROOM_WORKER_HEARTBEAT_SECONDS": "1",
        "CLEANROOM_WORKER_LOST_SECONDS": str(LOST_SECONDS),
        # each host boots its own warm template before it registers; one slot each keeps that to one boot
        # per host (cold boots of every run take over a minute each under TCG with four at once)
        "CLEANROOM_SAVED_STATE_SLOTS": "1",
    }
    with FleetServer(env, template=_factories["postgres"].template(seeded=True)) as fleet:
        assert fleet.server is not None
        session = _Session(fleet.server)
        try:
            yield fleet, session
        finally:
            session.close()


def _approved(session: _Session, code: str, count: int) -> list[int]:
    ids = []
    staged = session.upload("sales.csv", sales_csv(50))
    for i in range(count):
        run = session.propose(f"fleet {i}", code, [staged])
        session.approve(run)
        ids.append(run["id"])
    return ids


def _finished(session: _Session, ids: list[int], timeout: float = 600) -> dict[int, dict]:
    return wait_finished(session.person, ids, timeout)


def _audit(session: _Session, run_id: int) -> list[str]:
    return [e["action"] for e in session.person.get(f"/api/runs/{run_id}/audit").json()]


def test_two_workers_share_eight_runs_and_each_runs_once(fleet) -> None:
    fleet, session = fleet
    fleet.start_worker("alpha", capacity=1)
    fleet.start_worker("beta", capacity=1)
    fleet.wait_up({"alpha", "beta"})
    ids = _approved(session, "import os\nprint(os.urandom(8).hex())\n", 8)
    done = _finished(session, ids)
    assert {r["status"] for r in done.values()} == {"succeeded"}, {
        i: (r["status"], r["error_message"]) for i, r in done.items()
    }
    hosts = {r["host_id"] for r in done.values()}
    assert hosts == {"alpha", "beta"}, hosts  # spread over both
    for run_id in ids:  # each exactly once: one start, one finish, one charge
        actions = _audit(session, run_id)
        assert actions.count("run.started") == 1 and actions.count("run.finished") == 1, actions
        assert actions.count("credits.charged") == 1, actions
    assert len({r["result"]["stdout"] for r in done.values()}) == 8
    # the hosts are the operator's to see (`cleanroom workers list`), not a company's
    listed = json.loads(fleet.cli("workers", "list", "--json"))
    workers = {w["host_id"]: w for w in listed["hosts"]}
    assert workers["alpha"]["capacity"] == 1 and workers["beta"]["up"]
    health = session.person.get("/api/system/health").json()
    assert health["workers"] is None and health["queue_depth_all"] is None
    # every job went through the job queue as the workers' role, never as the API's
    with psycopg.connect(POSTGRES_URL) as admin:
        roles = admin.execute(  # this fleet's database only: another run of the suite may share the server
            "SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name LIKE 'cleanroom-worker-%%' "
            "AND datname = %s",
            (fleet.name,),
        ).fetchall()
    # each host's own role (`workers db-role HOST`), never the API's
    assert sorted(roles) == sorted((role,) for role in fleet.roles.values()), roles


def test_a_worker_killed_mid_run_is_noticed_and_its_runs_settled(fleet) -> None:
    fleet, session = fleet
    fleet.start_worker("alpha", capacity=1)
    fleet.wait_up({"alpha"})
    slow = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"
    (victim,) = _approved(session, slow, 1)
    deadline = time.monotonic() + 300
    while session.person.get(f"/api/runs/{victim}").json()[
        "status"
    ] != "running" or "run.started" not in _audit(session, victim):
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.3)
    time.sleep(3)  # its VM is up
    (waiting,) = _approved(session, "print('after')\n", 1)  # queued behind it (capacity 1)
    alpha = libvirt_conn.owner_token(
        fleet.workers["alpha"].pid
    )  # its guests carry it (not another checkout's)
    with libvirt_conn.connection() as conn:
        assert libvirt_conn.domains_owned_by(conn, alpha), "the victim's guest is not seen as alpha's"
    os.kill(fleet.workers["alpha"].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    while session.person.get(f"/api/runs/{victim}").json()["status"] == "running":
        assert time.monotonic() - killed_at < 30, "the lost worker was not noticed within 30 s"
        time.sleep(0.5)
    lost = session.person.get(f"/api/runs/{victim}").json()
    assert lost["status"] == "error" and "worker lost" in lost["error_message"], lost
    assert lost["credits_charged"] is None  # nothing was reported: nothing charged, never twice
    fleet.start_worker("beta", capacity=1)  # the queued run goes to another worker
    done = _finished(session, [waiting])[waiting]
    assert done["status"] == "succeeded" and done["host_id"] == "beta", done
    fleet.start_worker("alpha", capacity=1)  # alpha comes back: its recovery removes its leftover domain
    fleet.wait_up({"alpha"})
    with libvirt_conn.connection() as conn:
        left = libvirt_conn.domains_owned_by(conn, alpha)
    assert left == [], left
    assert session.person.get(f"/api/runs/{victim}").json()["status"] == "error"  # never started twice


def test_a_worker_whose_database_connections_are_cut_reconnects_and_runs_the_next_run(fleet) -> None:
    fleet, session = fleet
    fleet.start_worker("alpha", capacity=1)
    fleet.wait_up({"alpha"})
    (first,) = _approved(session, "print('before')\n", 1)
    assert _finished(session, [first])[first]["status"] == "succeeded"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        cut = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = %s",  # not another suite's alpha on the same server
            ("cleanroom-worker-alpha", fleet.name),
        ).fetchone()[0]
    assert cut >= 1  # the worker's job-queue connections are gone
    (second,) = _approved(session, "print('after')\n", 1)
    done = _finished(session, [second], timeout=300)[second]
    assert done["status"] == "succeeded" and done["host_id"] == "alpha", done
    assert fleet.workers["alpha"].poll() is None  # the same worker process, not a restart


def test_a_worker_token_and_the_api_agree_over_http(fleet) -> None:
    """Over the real server: the assistant's token cannot register as a worker; a worker's can."""
    fleet, session = fleet
    token = fleet.cli("workers", "enroll", "gamma").splitlines()[-1]
    url = fleet.url + "/api/worker/hosts"
    refused = session.assistant.post(url, json={"capacity": 1})
    assert refused.status_code == 401
    accepted = httpx.post(url, json={"capacity": 1}, headers={"Authorization": f"Bearer {token}"})
    assert accepted.status_code == 200 and accepted.json()["host_id"] == "gamma"


def test_a_flow_runs_step_by_step_on_a_worker_with_its_hand_over_fetched(fleet) -> None:
    fleet, session = fleet
    fleet.start_worker("alpha", capacity=1)
    fleet.wait_up({"alpha"})
    staged = session.upload("sales.csv", sales_csv(50))
    first = (
        "import glob, json\npath = glob.glob('/work/input/**/sales*.csv', recursive=True)[0]\n"
        "rows = open(path).read().splitlines()\n"
        "json.dump({'rows': len(rows)}, open('/work/output/conclusion.json', 'w'))\n"
        "open('/work/output/note.txt', 'w').write('from step one')\n"
    )
    second = (
        "import json, os\nprint(json.dumps({'flow': sorted(os.listdir('/work/flow/step-1')),"
        " 'input': os.listdir('/work/input'), 'rows': json.load(open('/work/flow/step-1/conclusion.json'))['rows'],"
        " 'note': open('/work/flow/step-1/note.txt').read()}))\n"
    )
    body = {
        "conversation_id": "fleet-flow",
        "title": "Two steps on a worker",
        "plan": "",
        "steps": [
            {"title": "Count", "code": first, "datasets": [], "files": [staged], "capability": "read"},
            {
                "title": "Read it",
                "code": second,
                "datasets": [],
                "files": [],
                "capability": "read",
                "receives": [{"step": 1, "name": "note.txt"}],
            },
        ],
    }
    r = session.assistant.post("/api/flows", json=body)
    assert r.status_code == 201, r.text
    flow = r.json()
    hashes = [{k: s["run"][k] for k in ("code_sha256", "bundle_sha256")} for s in flow["steps"]]
    r = session.person.post(f"/api/flows/{flow['id']}/approve", json={"steps": hashes})
    assert r.status_code == 200, r.text
    ids = [s["run"]["id"] for s in flow["steps"]]
    done = _finished(session, ids)
    assert [done[i]["status"] for i in ids] == ["succeeded", "succeeded"], {
        i: (r["status"], r["error_message"]) for i, r in done.items()
    }
    assert {done[i]["host_id"] for i in ids} == {"alpha"}
    seen = json.loads(done[ids[1]]["result"]["stdout"])
    assert seen["flow"] == ["conclusion.json", "note.txt"] and seen["note"] == "from step one", seen
    assert seen["rows"] == 51 and sorted(seen["input"]) == ["README.txt", "manifest.json"], seen  # no files/
    assert session.person.get(f"/api/flows/{flow['id']}").json()["status"] == "succeeded"
