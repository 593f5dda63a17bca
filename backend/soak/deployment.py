"""The deployment the soak runs against: `cleanroom serve --no-console` (the embedded default: SQLite, the
API and a worker process it supervises) on a freshly seeded demo database in a folder of its own.

The data directory is a small tmpfs of its own where the machine allows mounting one (root), so that the
nemesis can fill it to a few MB free without touching the rest of the machine; elsewhere the disk fault is
reported as unavailable. The API can be killed (SIGKILL, as a crash) and started again on the same data.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from backend.localhost import free_port, start_fleet_host
from backend.sandbox.libvirt_conn import owner_alive, owner_token
from backend.settings import REPO_ROOT

DATA_DISK_MIB = 1024


class Deployment:
    def __init__(self, extra_env: dict[str, str] | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cleanroom-soak-"))
        self.root.chmod(0o755)  # the guests' QEMU uids pass it to the run folder (data/runs)
        self.data = self.root / "data"
        self.data.mkdir()
        self.tmpfs = _mount_tmpfs(self.data)
        self.data.chmod(0o755)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")},
            "CLEANROOM_DATA_DIR": str(self.data),
            "DATABASE_URL": f"sqlite:///{self.data / 'cleanroom.sqlite3'}",
            "CLEANROOM_API_PORT": str(self.port),
            "CLEANROOM_API_BASE_URL": self.url,
            "PYTHONUNBUFFERED": "1",
            # the soak proposes more in an hour than a person would
            "CLEANROOM_MAX_PROPOSALS_PER_USER_PER_HOUR": "100000",
            "CLEANROOM_MAX_PROPOSALS_PER_COMPANY_PER_HOUR": "100000",
            "CLEANROOM_MIN_SCHEDULE_INTERVAL_MINUTES": "1",  # its schedule fires every minute
            **(extra_env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.seen: set[str] = set()  # every worker that may have owned a guest (the leftover check's list)
        self.exits: list[str] = []  # fleet hosts that ended on their own, and why (their log's last line)

    mode = "embedded"

    @property
    def database(self) -> Path:
        return self.data / "cleanroom.sqlite3"

    def connect(self) -> Any:
        """A DB-API connection to the product's database for the invariants: read-only, tuple rows."""
        return sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)

    def run_dirs(self) -> list[Path]:
        """Where its workers keep their runs' folders and disks (data/runs: the folder's parents let the
        guests' QEMU uids pass)."""
        return [self.data / "runs"]

    def owner_tokens(self) -> set[str]:
        """Who may own this deployment's guests now: its live worker (the pid file names it)."""
        try:
            token = (self.data / "worker.pid").read_text().strip()
        except OSError:
            return set()
        live = {token} if token else set()
        self.seen |= live
        return live

    def supervise(self) -> list[str]:
        """What an init system would do for the deployment's processes; `serve` supervises its own worker."""
        return []

    def kill_worker(self, rng: random.Random) -> str:
        self.owner_tokens()
        pid = self.worker_pid()
        if pid is None:
            return "no worker running (skipped)"
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return f"worker {pid} killed (serve starts a new one)"

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "backend", *args],
            env=self.env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        if check and done.returncode:
            raise RuntimeError(f"cleanroom {' '.join(args)} failed: {(done.stderr or done.stdout)[-1500:]}")
        return done

    def seed(self) -> None:
        self.cli("demo", "seed")
        self.cli(
            "credits",
            "top-up",
            "Acme Analytics",
            "1000000",
            "--reason",
            "soak: runs must not stop on credits",
        )

    def start(self, timeout: float = 120.0) -> None:
        log = open(self.root / "api.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            [sys.executable, "-m", "backend", "serve", "--no-console"],
            env=self.env,
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/api/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"the API did not start (start {self.starts}); see {self.root / 'api.log'}")

    def api_up(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill_api(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def worker_pid(self) -> int | None:
        """The live local worker of this data directory (its pid file names it with its start time)."""
        try:
            token = (self.data / "worker.pid").read_text().strip()
        except OSError:
            return None
        return int(token.split(":", 1)[0]) if owner_alive(token) else None

    def stop(self, timeout: float = 300.0) -> int | None:
        """As an operator stops it: SIGTERM; the worker finishes its running VMs and exits. Returns the pid
        of a worker still alive after `timeout` (and then kills it), else None."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        deadline = time.monotonic() + timeout
        while self.worker_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        stuck = self.worker_pid()
        if stuck is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stuck, signal.SIGKILL)
        return stuck

    def remove(self) -> None:
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.data)], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _mount_tmpfs(path: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DATA_DISK_MIB}m,mode=0755", "cleanroom-soak", str(path)],
        check=False,
        capture_output=True,
    )
    return done.returncode == 0


class FleetDeployment(Deployment):
    """A fleet on this machine: the API in fleet mode (`CLEANROOM_WORKERS=fleet`) on a PostgreSQL database of
    its own, and two `cleanroom worker` hosts, each with its own data directory and its own database role
    (procrastinate's tables only, its own queue's rows). A killed host is started again after a pause, as its supervisor would."""

    mode = "fleet"
    # fixed, and the fleet tests' own: their warm saved states are made once per image on this machine (a
    # new host id boots its own templates first, a minute or more under TCG)
    HOSTS = ("alpha", "beta")

    def __init__(self) -> None:
        from backend.benches.workers import _admin, _admin_url

        self.name = f"soak_{uuid.uuid4().hex[:10]}"
        # one role per host (`cleanroom workers db-role HOST`): each sees its own queue only
        self.roles = {host: f"{self.name}_{host}" for host in self.HOSTS}
        _admin(f'CREATE DATABASE "{self.name}"')
        super().__init__(
            {
                "DATABASE_URL": f"{_admin_url().rpartition('/')[0]}/{self.name}",
                "CLEANROOM_WORKERS": "fleet",
                "CLEANROOM_STANDBY_IN_SERVICE": "off",
                "CLEANROOM_SAVED_STATE_SLOTS": "1",
                "CLEANROOM_WORKER_HEARTBEAT_SECONDS": "2",
                "CLEANROOM_WORKER_LOST_SECONDS": "20",
            }
        )
        self.worker_urls: dict[str, str] = {}
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.tokens: dict[str, str] = {}
        self.lock = threading.Lock()  # the nemesis and the supervisor both start hosts
        self.held_down: set[str] = set()  # killed by the nemesis, started again by it after a pause

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.env["DATABASE_URL"], autocommit=True)

    def seed(self) -> None:
        super().seed()
        from backend.fleet.queue import role_url

        for host, role in self.roles.items():
            password = secrets.token_urlsafe(24)
            subprocess.run(  # the cluster's other databases are not the soak's to change
                [
                    sys.executable,
                    "-m",
                    "backend",
                    "workers",
                    "db-role",
                    host,
                    role,
                    "--leave-other-databases",
                ],
                env={**self.env, "CLEANROOM_WORKER_DB_PASSWORD": password},
                cwd=REPO_ROOT,
                check=True,
                capture_output=True,
            )
            self.worker_urls[host] = role_url(self.env["DATABASE_URL"], role, password)

    def start(self, timeout: float = 120.0) -> None:
        super().start(timeout)
        with self.lock:
            for host in self.HOSTS:
                if host not in self.workers:
                    self.start_worker(host)

    def start_worker(self, host: str) -> None:
        if host not in self.tokens:
            self.tokens[host] = self.cli("workers", "enroll", host).stdout.strip().splitlines()[-1]
        data = self.root / f"worker-{host}"
        data.mkdir(exist_ok=True)
        self.workers[host] = start_fleet_host(
            host,
            capacity=1,
            env=self.env,
            token=self.tokens[host],
            database_url=self.worker_urls[host],
            data_dir=data,
        )

    def run_dirs(self) -> list[Path]:
        return [self.root / f"worker-{host}" / "runs" for host in self.HOSTS]

    def owner_tokens(self) -> set[str]:
        live = {owner_token(p.pid) for p in self.workers.values() if p.poll() is None}
        self.seen |= live
        return live

    def supervise(self) -> list[str]:
        """A host that ended on its own is started again, as its init system would (`Restart=always`)."""
        restarted = []
        with self.lock:
            for host, proc in list(self.workers.items()):
                if host in self.held_down or proc.poll() is None:
                    continue
                log = (self.root / f"worker-{host}" / "worker.log").read_text(errors="replace").strip()
                self.exits.append(
                    f"{host} exited {proc.returncode}: {log.splitlines()[-1][-200:] if log else ''}"
                )
                self.start_worker(host)
                restarted.append(host)
        return restarted

    def kill_worker(self, rng: random.Random) -> str:
        host = rng.choice(self.HOSTS)
        with self.lock:
            proc = self.workers.get(host)
            if proc is None or proc.poll() is not None:
                return f"host {host} not running (skipped)"
            self.owner_tokens()
            self.held_down.add(host)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        time.sleep(rng.uniform(1.0, 10.0))
        with self.lock:
            self.start_worker(host)  # its recovery removes what the killed one left
            self.held_down.discard(host)
        return f"host {host} ({proc.pid}) killed; started again"

    def worker_pid(self) -> int | None:
        return None  # the API starts no worker of its own in a fleet

    def stop(self, timeout: float = 300.0) -> int | None:
        super().stop(timeout)
        stuck = None
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.terminate()  # drains: its running VMs finish
        for proc in self.workers.values():
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                stuck = proc.pid
                proc.kill()
        return stuck

    def remove(self) -> None:
        from backend.benches.workers import _admin

        for proc in self.workers.values():
            if proc.poll() is None:
                proc.kill()
        super().remove()
        _admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        for role in self.roles.values():
            _admin(f'DROP ROLE IF EXISTS "{role}"')
