"""This product's own processes on this machine, for the benches, the soak and the tests: a free loopback
port, and a fleet host started as `cleanroom worker` (one place, so the benches and the soak start hosts
the same way)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from backend.settings import REPO_ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_fleet_host(
    host_id: str, *, capacity: int, env: dict[str, str], token: str, database_url: str, data_dir: Path
) -> subprocess.Popen[bytes]:
    """`cleanroom worker` for `host_id`, logging to `data_dir/worker.log`. `env` is the API's settings; the
    host gets its own data directory (nothing shared with the API but HTTP and the job queue), its token, and
    `database_url`, the workers' role (procrastinate's tables only)."""
    host_env = {
        **env,
        "CLEANROOM_DATA_DIR": str(data_dir),
        "CLEANROOM_WORKER_TOKEN": token,
        "DATABASE_URL": database_url,
    }
    log = open(data_dir / "worker.log", "ab")  # noqa: SIM115 - the child holds it; ours closes below
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "backend", "worker", "--host-id", host_id, "--capacity", str(capacity)],
            env=host_env,
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finally:
        log.close()
