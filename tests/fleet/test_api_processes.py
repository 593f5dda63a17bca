"""`cleanroom serve --processes 2` in a fleet on PostgreSQL: two API processes on one port, and what must happen
once (dispatch, reaping, schedule firing, bundle sweeps: the dispatcher's loop) happens in exactly one of them,
the one holding the leader lock; when it dies, the other takes over. The dispatch path under load with two
processes (each run claimed once, no server error) is the control-plane bench's test, which runs with two."""

from __future__ import annotations

import os
import re
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from backend.benches.control_plane import _tree
from backend.benches.workers import FleetServer
from backend.fleet.queue import LEADER_LOCK
from tests.support.databases import POSTGRES_URL

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
LEADS = re.compile(r"this API process \(pid (\d+)\) dispatches")


def _needs_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (scripts/test sets CLEANROOM_TEST_POSTGRES_URL)")
    monkeypatch.setenv("CLEANROOM_BENCH_POSTGRES_URL", POSTGRES_URL)


def _until(what, seconds: float, why: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"not within {seconds:.0f} s: {why}")


def _sql(fleet: FleetServer, query: str, *args: object) -> list[tuple]:
    with psycopg.connect(fleet.env["DATABASE_URL"], autocommit=True) as conn:
        cursor = conn.execute(query, args)
        return cursor.fetchall() if cursor.description else []


def _leaders(fleet: FleetServer) -> int:
    """How many sessions of the fleet's database hold the leader lock, the table `api_leader` locked
    (`LEADER_LOCK`; PostgreSQL's own view)."""
    assert "api_leader" in LEADER_LOCK and "EXCLUSIVE" in LEADER_LOCK
    rows = _sql(
        fleet,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND relation = 'api_leader'::regclass "
        "AND mode = 'ExclusiveLock' AND granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    return int(rows[0][0]) if rows else 0


def _leads(fleet: FleetServer) -> list[int]:
    """The pids that said they took the lead, in order (the API's log)."""
    assert fleet.server is not None
    return [int(pid) for pid in LEADS.findall((Path(fleet.server.root) / "api.log").read_text())]


def _api_processes(serve: int) -> list[int]:
    """The API processes uvicorn's supervisor (`serve`) started (multiprocessing's spawned children)."""
    found = []
    for pid in _tree(serve):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if pid != serve and b"spawn_main" in argv:
            found.append(pid)
    return found


def _fired(fleet: FleetServer, schedule_id: int) -> int:
    return _sql(fleet, "SELECT count(*) FROM run WHERE schedule_id = %s", schedule_id)[0][0]


def _make_due(fleet: FleetServer, schedule_id: int) -> None:
    due = datetime.now(UTC) - timedelta(seconds=1)
    _sql(fleet, "UPDATE schedule SET next_fire_at = %s WHERE id = %s", due, schedule_id)


def test_two_api_processes_one_dispatcher_a_schedule_fires_once_and_the_lead_moves_on(
    _factories, monkeypatch
) -> None:
    _needs_postgres(monkeypatch)
    env = {"CLEANROOM_WORKER_HEARTBEAT_SECONDS": "1", "CLEANROOM_SCHEDULE_CHECK_SECONDS": "2"}
    with FleetServer(env, template=_factories["postgres"].template(seeded=True), processes=2) as fleet:
        assert fleet.server is not None and fleet.server.process is not None
        serve = fleet.server.process.pid
        apis = _until(lambda: _api_processes(serve) or None, 30, "the API processes started")
        assert len(apis) == 2, apis
        _until(lambda: len(_leads(fleet)) >= 1, 30, "one process took the lead")
        assert _leaders(fleet) == 1
        first = _leads(fleet)[0]
        assert first in apis

        # a schedule, from a run proposed here and marked succeeded in the database (no host runs it: this test
        # is about the API processes, and only a succeeded run may be scheduled)
        with httpx.Client(base_url=fleet.url, headers={"Origin": fleet.url}, timeout=60) as person:
            signed_in = person.post(
                "/api/auth/login", json={"email": "maria@acme.example", "password": "demo"}
            )
            signed_in.raise_for_status()
            token = person.post("/api/me/tokens", json={"name": "processes"}).json()["token"]
            proposed = httpx.post(
                fleet.url + "/api/runs",
                headers={"Authorization": f"Bearer {token}"},
                json={
                    "conversation_id": "p",
                    "title": "t",
                    "plan": "p",
                    "code": "print(1)\n",
                    "datasets": ["deals"],
                },
                timeout=60,
            )
            assert proposed.status_code == 201, proposed.text
            run_id = proposed.json()["id"]
            _sql(fleet, "UPDATE run SET status = 'succeeded' WHERE id = %s", run_id)
            made = person.post("/api/schedules", json={"run_id": run_id, "cron": "0 3 * * *"})
            assert made.status_code == 201, made.text
            schedule_id = made.json()["id"]

        # due now: fired once, though two API processes run (the dispatcher fires due schedules every 2 s here)
        _make_due(fleet, schedule_id)
        _until(lambda: _fired(fleet, schedule_id) >= 1, 60, "the due schedule fired")
        time.sleep(5)  # a second firing would have come by now (both processes have passed their 2 s twice)
        assert _fired(fleet, schedule_id) == 1
        assert len(_leads(fleet)) == 1  # and only one process ever dispatched (each would say so)

        # the leader dies: the other process (or uvicorn's replacement) takes the lead within seconds
        os.kill(first, signal.SIGKILL)
        _until(lambda: len(_leads(fleet)) >= 2, 60, "another API process took the lead")
        second = _leads(fleet)[1]
        assert second != first
        _until(lambda: _leaders(fleet) == 1, 30, "PostgreSQL shows one leader")
        # control: the new leader fires what falls due, once
        _make_due(fleet, schedule_id)
        _until(lambda: _fired(fleet, schedule_id) >= 2, 60, "the new leader fired the schedule")
        assert _fired(fleet, schedule_id) == 2
        assert _leaders(fleet) == 1
