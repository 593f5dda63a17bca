"""`cleanroom bench workers`: the fleet on this machine, measured.

A real API (`cleanroom serve`, CLEANROOM_WORKERS=fleet) on a fresh PostgreSQL database and real `cleanroom
worker` processes, each with its own data directory and the workers' database role (nothing shared with the
API but HTTP and the job queue). Reports: 16 trivial runs approved at once, finished by one worker and by two (capacity 1 each; the
ratio of the completion times), and approve → user code starts (p50/p95) through procrastinate against the
in-process queue of the embedded default (both restore a saved state per run: standby guests off).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from backend.benches import ApiServer, ratio, sales_csv, summarize
from backend.localhost import start_fleet_host
from backend.settings import REPO_ROOT

TRIVIAL = "import time\nprint(time.time_ns(), flush=True)\n"
FINISHED = {"succeeded", "failed", "timed_out", "out_of_memory", "error", "cancelled", "rejected", "skipped"}


def _admin_url() -> str:
    url = os.environ.get("CLEANROOM_BENCH_POSTGRES_URL") or os.environ.get("CLEANROOM_TEST_POSTGRES_URL")
    if not url:
        raise RuntimeError(
            "the fleet needs PostgreSQL: set CLEANROOM_BENCH_POSTGRES_URL to a server URL whose user may create "
            "databases (scripts/setup --test starts one: postgresql://cleanroom:cleanroom@127.0.0.1:5432/postgres)"
        )
    return url


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


class FleetServer:
    """A fresh PostgreSQL database, the API in fleet mode on it, and `cleanroom worker` processes that reach
    the job queue with a role of their own (`cleanroom workers db-role`), never the API's."""

    def __init__(
        self, env: dict[str, str] | None = None, template: str | None = None, processes: int = 1
    ) -> None:
        self.processes = processes  # API processes (`serve --processes`)
        self.name = f"fleet_{uuid.uuid4().hex[:10]}"
        # a database already seeded with the demo companies to clone (the test suite's template), so the API's
        # `demo seed` finds companies and skips; without one the API seeds an empty database
        self.template = template
        # roles are the server's, not the database's: one per host of this fleet (`workers db-role HOST`)
        self.roles: dict[str, str] = {}
        self.worker_database_urls: dict[str, str] = {}
        base = _admin_url().rpartition("/")[0]
        self.env = {
            "DATABASE_URL": f"{base}/{self.name}",
            "CLEANROOM_WORKERS": "fleet",
            "CLEANROOM_STANDBY_IN_SERVICE": "off",
            # a new host boots its own warm templates before it registers: one slot each keeps that short,
            # and the bench's host ids are fixed so their saved states are made once per image
            "CLEANROOM_SAVED_STATE_SLOTS": "1",
            **(env or {}),
        }
        self.server: ApiServer | None = None
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.dirs: dict[str, Path] = {}
        self.tokens: dict[str, str] = {}

    def __enter__(self) -> FleetServer:
        _admin(f'CREATE DATABASE "{self.name}"' + (f' TEMPLATE "{self.template}"' if self.template else ""))
        try:
            self.server = ApiServer(
                self.env, processes=self.processes, seeded=bool(self.template)
            ).__enter__()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        try:
            self.stop_workers()
        finally:
            if self.server is not None:
                self.server.__exit__()
            _admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            for role in self.roles.values():
                _admin(f'DROP ROLE IF EXISTS "{role}"')  # its grants went with the database

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        assert self.server is not None
        out = subprocess.run(
            [sys.executable, "-m", "backend", *args],
            env={**self.server.env, **(env or {})},
            cwd=REPO_ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()

    def worker_database_url(self, host_id: str) -> str:
        """Host `host_id`'s own role (`cleanroom workers db-role`), made the first time it is asked for."""
        if host_id not in self.worker_database_urls:
            from backend.fleet.queue import role_url

            password = secrets.token_urlsafe(24)
            role = self.roles[host_id] = f"{self.name}_{host_id}"
            self.cli(  # the cluster's other databases are not the bench's to change
                "workers",
                "db-role",
                host_id,
                role,
                "--leave-other-databases",
                env={"CLEANROOM_WORKER_DB_PASSWORD": password},
            )
            self.worker_database_urls[host_id] = role_url(self.env["DATABASE_URL"], role, password)
        return self.worker_database_urls[host_id]

    def start_worker(self, host_id: str, capacity: int = 1) -> None:
        assert self.server is not None
        if host_id not in self.tokens:
            self.tokens[host_id] = self.cli("workers", "enroll", host_id).splitlines()[-1]
        data = self.dirs.setdefault(host_id, Path(tempfile.mkdtemp(prefix=f"cleanroom-worker-{host_id}-")))
        self.workers[host_id] = start_fleet_host(
            host_id,
            capacity=capacity,
            env=self.server.env,
            token=self.tokens[host_id],
            database_url=self.worker_database_url(host_id),
            data_dir=data,
        )

    def stop_workers(self, timeout: float = 120) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.terminate()  # drains: running VMs finish
        for proc in self.workers.values():
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.workers.clear()

    def hosts_up(self) -> set[str]:
        """The hosts registered and not lost, as the operator sees them (no company's caller does)."""
        import psycopg

        with psycopg.connect(self.env["DATABASE_URL"]) as conn:
            rows = conn.execute("SELECT host_id FROM worker_host WHERE lost_at IS NULL").fetchall()
        return {row[0] for row in rows}

    def wait_up(self, hosts: set[str], timeout: float = 900) -> None:
        """Until every host registered (a new host first boots its own warm templates)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for host, proc in self.workers.items():
                if proc.poll() is not None:
                    log = (self.dirs[host] / "worker.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"worker {host} exited ({proc.returncode}):\n{log}")
            if hosts <= self.hosts_up():
                return
            time.sleep(0.3)
        raise RuntimeError(f"workers {sorted(hosts)} did not register; logs under {self.dirs}")


def wait_finished(person: httpx.Client, ids: list[int], timeout: float = 900) -> dict[int, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    done: dict[int, dict[str, Any]] = {}
    while len(done) < len(ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs {sorted(set(ids) - set(done))} did not finish in {timeout:.0f} s")
        for run_id in ids:
            if run_id not in done:
                run = person.get(f"/api/runs/{run_id}").json()
                if run["status"] in FINISHED:
                    done[run_id] = run
        time.sleep(0.1)
    return done


def _batch(fleet: FleetServer, hosts: list[str], runs: int) -> dict[str, Any]:
    from backend.benches.service import _Session

    assert fleet.server is not None
    session = _Session(fleet.server)
    try:
        for host in hosts:
            fleet.start_worker(host, capacity=1)
        fleet.wait_up(set(hosts))
        staged = [session.upload("sales.csv", sales_csv(50))]
        warm = [session.propose("warm-up", TRIVIAL, staged)["id"] for _ in hosts]  # each host's saved states
        for run_id in warm:
            session.approve(session.person.get(f"/api/runs/{run_id}").json())
        wait_finished(session.person, warm)
        proposed = [session.propose(f"batch {i}", TRIVIAL, staged) for i in range(runs)]
        started = time.perf_counter()
        for run in proposed:
            session.approve(run)
        done = wait_finished(session.person, [r["id"] for r in proposed])
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        session.close()
        fleet.stop_workers()
    return {
        "workers": len(hosts),
        "all_done_ms": round(elapsed, 1),
        "succeeded": sum(1 for r in done.values() if r["status"] == "succeeded"),
        "by_host": {h: sum(1 for r in done.values() if r.get("host_id") == h) for h in hosts},
    }


def _approve_to_code(server: ApiServer, samples: int, start: Any = None) -> dict[str, Any]:
    from backend.benches.service import _Session, _timed

    session = _Session(server)
    failures: list[str] = []
    try:
        if start is not None:
            start(session)
        staged = [session.upload("sales.csv", sales_csv(50))]
        _timed(session, TRIVIAL, staged, failures)  # warm-up: saved states, first imports
        values = [_timed(session, TRIVIAL, staged, failures)[0] for _ in range(samples)]
    finally:
        session.close()
    clean = [v for v in values if v == v]
    return {"approve_to_user_code_ms": summarize(clean) if clean else None, "failures": failures[:10]}


def run_workers_bench(runs: int = 16, samples: int = 10) -> dict[str, Any]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)
    report: dict[str, Any] = {}
    with FleetServer() as fleet:
        one = _batch(fleet, ["bench_a"], runs)
        two = _batch(fleet, ["bench_a", "bench_b"], runs)
    report["sixteen_trivial_runs"] = {
        "one_worker": one,
        "two_workers": two,
        "ratio_two_vs_one_all_done": ratio(two["all_done_ms"], one["all_done_ms"]),
    }
    with FleetServer() as fleet:
        assert fleet.server is not None

        def one_worker(session: Any) -> None:
            fleet.start_worker("bench_a", capacity=1)
            fleet.wait_up({"bench_a"})

        through_queue = _approve_to_code(fleet.server, samples, start=one_worker)
        fleet.stop_workers()
    in_process_env = {
        "CLEANROOM_STANDBY_IN_SERVICE": "off",
        "CLEANROOM_MAX_CONCURRENT_VMS": "1",
        "CLEANROOM_SAVED_STATE_SLOTS": "1",
    }
    with ApiServer(in_process_env) as server:
        in_process = _approve_to_code(server, samples)
    report["approve_to_user_code"] = {
        "procrastinate_fleet": through_queue,
        "in_process_queue": in_process,
    }
    p50 = (through_queue["approve_to_user_code_ms"] or {}).get("p50")
    base = (in_process["approve_to_user_code_ms"] or {}).get("p50")
    report["added_by_the_job_queue_p50_ms"] = round(p50 - base, 1) if p50 and base else None
    report["goals"] = {"added_by_the_job_queue_p50_ms": 100, "ratio_two_vs_one_all_done": "< 1 (faster)"}
    return report


def hang_figures(runs: int, parallel: int, wall: int) -> dict[str, Any]:
    """The same trivial run through the API and two fleet workers (one VM each at a time), `parallel`
    approved at once; a silent guest's evidence is in its worker's log."""
    from backend.benches.hangs import TRIVIAL as HANG_CODE
    from backend.benches.service import _Session

    counts = {"ok": 0, "hang": 0, "failed": 0}
    problems: list[dict[str, Any]] = []
    evidence: list[str] = []
    began = time.monotonic()
    limits = {
        "CLEANROOM_MAX_PROPOSALS_PER_USER_PER_HOUR": str(runs + 10),
        "CLEANROOM_MAX_PROPOSALS_PER_COMPANY_PER_HOUR": str(runs + 10),
    }
    with FleetServer({"CLEANROOM_SAVED_STATE_SLOTS": "1", **limits}) as fleet:
        assert fleet.server is not None
        session = _Session(fleet.server)
        try:
            for host in ("hang_a", "hang_b"):
                fleet.start_worker(host, capacity=1)
            fleet.wait_up({"hang_a", "hang_b"})
            staged = [session.upload("sales.csv", sales_csv(50))]
            done = 0
            while done < runs:
                batch = []
                for _ in range(min(parallel, runs - done)):
                    r = session.assistant.post(
                        "/api/runs",
                        json={
                            "conversation_id": "hangs",
                            "title": "trivial",
                            "plan": "bench",
                            "code": HANG_CODE,
                            "files": staged,
                            "limits": {"wall_seconds": wall},
                        },
                    )
                    if r.status_code != 201:
                        raise RuntimeError(f"proposing failed: {r.status_code} {r.text[:500]}")
                    batch.append(r.json())
                for run in batch:
                    session.approve(run)
                for run_id, run in wait_finished(session.person, [r["id"] for r in batch]).items():
                    result = run.get("result") or {}
                    error = run.get("error_message") or result.get("error") or ""
                    ok = run["status"] == "succeeded" and len((result.get("stdout") or "").strip()) == 16
                    kind = "ok" if ok else "hang" if "stopped responding" in error else "failed"
                    counts[kind] += 1
                    if kind != "ok" and len(problems) < 20:
                        problems.append(
                            {
                                "run": run_id,
                                "status": run["status"],
                                "host": run.get("host_id"),
                                "error": error[-1500:],
                            }
                        )
                done += len(batch)
                print(
                    f"[hangs] fleet: {done}/{runs} ({counts}) after {time.monotonic() - began:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            session.close()
            fleet.stop_workers()
            for host, folder in fleet.dirs.items():
                log_text = (folder / "worker.log").read_text(errors="replace")
                evidence += [
                    f"{host}: {line[:6000]}" for line in log_text.splitlines() if "after READY" in line
                ]
    return {
        "runs": runs,
        "parallel": parallel,
        "wall_limit_seconds": wall,
        **counts,
        "seconds": round(time.monotonic() - began, 1),
        "problems": problems,
        "worker_evidence": evidence[:10],
    }
