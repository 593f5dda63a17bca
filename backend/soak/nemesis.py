"""The faults, each a function of the deployment that injects one and returns once the product has been
given what it needs to come back (a killed API is started again after a pause; a killed worker is started
again by `serve` itself; a filled disk is freed after a while).

`FAULTS` names them; `cleanroom soak --faults` chooses. `restart_libvirtd` restarts the machine's libvirtd,
which every checkout on the machine shares: the short soak in the suite leaves it out.
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

from backend.soak.deployment import Deployment

FILL_LEAVES_MIB = 4  # what a filled disk keeps free


def kill_api(dep: Deployment, rng: random.Random) -> str:
    dep.kill_api()  # its worker sees its parent gone, finishes its running VMs and exits
    time.sleep(rng.uniform(0.5, 4.0))
    dep.start()
    return f"API killed; started again ({dep.starts} starts)"


def kill_worker(dep: Deployment, rng: random.Random) -> str:
    pid = dep.worker_pid()
    if pid is None:
        return "no worker running (skipped)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return f"worker {pid} killed (serve starts a new one)"


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
}
SHARED_MACHINE_FAULTS = ("restart_libvirtd",)
