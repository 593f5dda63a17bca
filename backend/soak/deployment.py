"""The deployment the soak runs against: `cleanroom serve --no-console` (the embedded default: SQLite, the
API and a worker process it supervises) on a freshly seeded demo database in a folder of its own.

The data directory is a small tmpfs of its own where the machine allows mounting one (root), so that the
nemesis can fill it to a few MB free without touching the rest of the machine; elsewhere the disk fault is
reported as unavailable. The API can be killed (SIGKILL, as a crash) and started again on the same data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from backend.bench import _free_port
from backend.sandbox.libvirt_conn import owner_alive
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
        self.port = _free_port()
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
            **(extra_env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def database(self) -> Path:
        return self.data / "cleanroom.sqlite3"

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "backend", *args],
            env=self.env,
            cwd=REPO_ROOT,
            check=check,
            capture_output=True,
            text=True,
        )

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
