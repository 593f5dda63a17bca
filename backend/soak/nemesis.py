"""The faults, each a function of the deployment that injects one and returns once the product has been
given what it needs to come back (a killed API is started again after a pause; a killed worker is started
again by `serve` itself; a filled disk is freed after a while).

`FAULTS` names them, `BY_MODE` says which a mode takes, `cleanroom soak --faults` chooses. `restart_libvirtd`
and `restart_postgres` restart what every checkout on the machine shares: the short soaks in the suite leave
them out (`cut_database` ends only the deployment's own database connections).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from backend.soak.deployment import Deployment, FleetDeployment

FILL_LEAVES_MIB = 4  # what a filled disk keeps free


def kill_api(dep: Deployment, rng: random.Random) -> str:
    dep.kill_api()  # its worker sees its parent gone, finishes its running VMs and exits
    time.sleep(rng.uniform(0.5, 4.0))
    dep.start()
    return f"API killed; started again ({dep.starts} starts)"


def kill_worker(dep: Deployment, rng: random.Random) -> str:
    return dep.kill_worker(rng)


def cut_database(dep: Deployment, rng: random.Random) -> str:
    """Every connection to the deployment's PostgreSQL database ended at once (a network cut, a failover):
    the API and the hosts must reconnect. Only this deployment's database: safe beside other suites."""
    from backend.benches.workers import _admin

    if not isinstance(dep, FleetDeployment):
        return "no database server here (skipped)"
    _admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{dep.name}'")
    return f"connections to {dep.name} cut"


def restart_postgres(dep: Deployment, rng: random.Random) -> str:
    """The machine's PostgreSQL restarted (every database on it: not in the suite)."""
    versions = sorted(
        Path("/usr/lib/postgresql").iterdir(), key=lambda p: [int(x) for x in p.name.split(".")]
    )
    done = subprocess.run(
        ["pg_ctlcluster", versions[-1].name, "main", "restart", "-m", "fast"],
        check=False,
        capture_output=True,
        text=True,
    )
    return f"PostgreSQL restarted ({done.returncode}{': ' + done.stderr.strip()[-200:] if done.returncode else ''})"


def restart_libvirtd(dep: Deployment, rng: random.Random) -> str:
    try:
        pid = int(Path("/run/libvirtd.pid").read_text().strip())
    except (OSError, ValueError):
        return "libvirtd not found (skipped)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    time.sleep(rng.uniform(0.2, 2.0))
    started = dep.cli("sandbox", "daemons", check=False)
    return f"libvirtd {pid} killed; daemons: {started.stdout.strip() or started.stderr.strip()[-200:]}"


def fill_disk(dep: Deployment, rng: random.Random) -> str:
    if not dep.tmpfs:
        return "no data disk of its own here (skipped)"
    filler = dep.data / "soak-filler"
    free = os.statvfs(dep.data)
    size = free.f_bavail * free.f_frsize - FILL_LEAVES_MIB * 1024 * 1024
    if size > 0:
        subprocess.run(["fallocate", "-l", str(size), str(filler)], check=False, capture_output=True)
    time.sleep(rng.uniform(3.0, 12.0))
    filler.unlink(missing_ok=True)
    return f"data disk filled to {FILL_LEAVES_MIB} MB free, then freed"


FAULTS: dict[str, Callable[[Deployment, random.Random], str]] = {
    "kill_api": kill_api,
    "kill_worker": kill_worker,
    "restart_libvirtd": restart_libvirtd,
    "fill_disk": fill_disk,
    "cut_database": cut_database,
    "restart_postgres": restart_postgres,
}
BY_MODE = {
    "embedded": ("kill_api", "kill_worker", "restart_libvirtd", "fill_disk"),
    "fleet": ("kill_api", "kill_worker", "restart_libvirtd", "fill_disk", "cut_database", "restart_postgres"),
}
