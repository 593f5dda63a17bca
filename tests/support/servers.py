"""The real thing on free localhost ports: the API (with its in-process worker and real VMs) and the console,
each its own process, on a freshly seeded SQLite database in a temporary data directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from backend.benches import seed_demo
from backend.localhost import free_port

REPO = Path(__file__).resolve().parents[2]


def wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {seconds}s ({last})")


@dataclass
class Servers:
    data_dir: Path
    api_port: int = field(default_factory=free_port)
    console_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen] = field(default_factory=list)
    umask: int = -1  # the servers' umask (-1: this process's)
    console_by_serve: bool = False  # the console started by `serve` itself, as `scripts/run` does

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.console_port}"

    def env(self) -> dict[str, str]:
        inherited = {  # nicegui treats a PYTEST_* environment as its own screen test and will not serve
            k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NICEGUI_"))
        }
        return {
            # a served process no longer loads the scanner's tier 3 at start, but its first scan of prose does
            # (2.0 s of CPU per process; the suite starts dozens, and many stage prose): off in the servers the
            # suite starts, whose claims are not the scanner's. Tier 3 is held in-process, on:
            # tests/injection/test_tier3.py (the lazy load of a served app too), tests/staging/test_stage_bundle.py
            "CLEANROOM_INJECTION_TIER3": "0",
            **inherited,
            "CLEANROOM_DATA_DIR": str(self.data_dir),
            "DATABASE_URL": f"sqlite:///{self.data_dir / 'cleanroom.sqlite3'}",
            "CLEANROOM_API_PORT": str(self.api_port),
            "CLEANROOM_CONSOLE_PORT": str(self.console_port),
            "CLEANROOM_API_BASE_URL": self.api_url,
            "PYTHONUNBUFFERED": "1",
            # the seeded demo is a copy (`seed_demo`): a database moved away from its audit anchor, which `serve`
            # refuses unless told to start a new one (backend/audit/anchor.py `start_problem`)
            "CLEANROOM_NEW_ANCHOR": "1",
        }

    def seed(self) -> None:
        """The data directory with the demo companies, as `scripts/run` leaves it (seeded once in this
        process, copied after: `seed_demo`)."""
        seed_demo(self.data_dir, self.env())

    def start(self) -> Servers:
        self.seed()
        commands = [("api", [sys.executable, "-m", "backend", "serve", "--no-console"])]
        if self.console_by_serve:
            commands = [("api", [sys.executable, "-m", "backend", "serve"])]
        else:
            commands.append(("console", [sys.executable, "-m", "console"]))
        for name, args in commands:
            log = open(self.data_dir / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
            self.processes.append(
                subprocess.Popen(
                    args, env=self.env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, umask=self.umask
                )
            )
        try:
            wait_for(self.api_url + "/api/health")
            wait_for(self.console_url + "/login")
        except BaseException:
            self.stop()  # never leave a half-started pair behind
            raise
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        self.processes.clear()

    def log(self, name: str) -> str:
        path = self.data_dir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
