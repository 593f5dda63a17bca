"""The embedded default: `cleanroom serve` runs its worker as a supervised process of its own. Killing the
worker does not take the API down (a new worker starts and the next run succeeds); killing the API does not
kill a running VM (the orphaned worker finishes the run, then exits)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.benches import ApiServer, sales_csv, seed_demo
from backend.benches.service import _Session

pytestmark = pytest.mark.vm


def _pid(server: ApiServer, previous: int | None = None, timeout: float = 120) -> int:
    """The local worker's pid (from its pid file), once it is ready and is not `previous`."""
    path = server.root / "worker.pid"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(path.read_text().split(":", 1)[0])
            if pid != previous and os.path.exists(f"/proc/{pid}"):
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"no local worker; see {server.root / 'api.log'}")


def _status(server: ApiServer, run_id: int) -> str:
    with sqlite3.connect(server.root / "cleanroom.sqlite3") as conn:
        return conn.execute("SELECT status FROM run WHERE id = ?", (run_id,)).fetchone()[0]


def _wait(server: ApiServer, run_id: int, done: set[str], timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while (status := _status(server, run_id)) not in done:
        assert time.monotonic() < deadline, status
        time.sleep(0.3)
    return status


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


FINISHED = {"succeeded", "failed", "error", "timed_out", "out_of_memory", "cancelled"}


def test_a_worker_crash_leaves_the_api_up_and_a_new_worker_takes_the_next_run() -> None:
    with ApiServer({"CLEANROOM_STANDBY_IN_SERVICE": "off"}) as server:
        session = _Session(server)
        try:
            first = _pid(server)
            os.kill(first, signal.SIGKILL)
            assert session.person.get("/api/health").status_code == 200  # the API is still there
            second = _pid(server, previous=first)
            assert second != first
            staged = session.upload("sales.csv", sales_csv(20))
            run = session.propose("after a crash", "print('fine')", [staged])
            session.approve(run)
            assert _wait(server, run["id"], FINISHED) == "succeeded"
        finally:
            session.close()


def test_the_api_going_away_does_not_kill_a_running_vm() -> None:
    server = ApiServer({"CLEANROOM_STANDBY_IN_SERVICE": "off"}).__enter__()
    session = _Session(server)
    try:
        worker = _pid(server)
        staged = session.upload("sales.csv", sales_csv(20))
        run = session.propose("outlives the API", "import time\ntime.sleep(6)\nprint('done')", [staged])
        session.approve(run)
        _wait(server, run["id"], {"running", *FINISHED})
        assert server.process is not None
        server.process.kill()  # the API dies (no clean shutdown); its worker is orphaned
        server.process.wait()
        assert _wait(server, run["id"], FINISHED) == "succeeded"  # the VM ran to its end
        deadline = time.monotonic() + 60
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.2)  # and then the orphaned worker left (it takes no new run)
        assert _gone(worker), "the orphaned worker did not exit after its run"
    finally:
        session.close()
        server.__exit__()


def _local_worker(root: Path, parent: int) -> tuple[dict[str, str], subprocess.Popen[bytes]]:
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")},
        "CLEANROOM_DATA_DIR": str(root),
        "DATABASE_URL": f"sqlite:///{root / 'cleanroom.sqlite3'}",
        "CLEANROOM_STANDBY_IN_SERVICE": "off",
        "CLEANROOM_WORKER_PARENT": str(parent),
    }
    seed_demo(root, env)
    log = open(root / "worker.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "backend", "worker", "--local"], env=env, stdout=log, stderr=log
    )
    return env, proc


def test_a_worker_whose_api_died_while_it_started_still_ends(tmp_path: Path) -> None:
    """Found by the soak: `serve` killed while its new worker was still importing left a worker that took
    init for its API and never ended (and the next `serve` waited for it for ever). The worker now knows its
    API by the pid `serve` names, not by asking getppid() once it is up."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid whose process no longer exists: the API that died during the worker's start-up
    for name, parent in (("control", os.getpid()), ("orphan", gone.pid)):
        root = tmp_path / name
        root.mkdir()
        _, proc = _local_worker(root, parent)
        try:
            pid = proc.pid
            deadline = time.monotonic() + 120
            if name == "control":  # its API is alive: it starts, is ready, and stays
                while not (root / "worker.pid").exists():
                    assert proc.poll() is None and time.monotonic() < deadline, (
                        root / "worker.log"
                    ).read_text()
                    time.sleep(0.2)
                time.sleep(3)
                assert proc.poll() is None, (root / "worker.log").read_text()
            else:  # its API is gone: it drains (nothing running) and exits by itself
                while proc.poll() is None:
                    assert time.monotonic() < deadline, f"worker {pid} outlived its API"
                    time.sleep(0.2)
                assert "the API that started this worker is gone" in (root / "worker.log").read_text()
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=120)
