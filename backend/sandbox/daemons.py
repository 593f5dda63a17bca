"""Start virtlogd + libvirtd on hosts without systemd, under a process that reaps their children.

libvirt daemonizes every QEMU, so an exited QEMU becomes a child of the nearest "subreaper"
(or PID 1). libvirt waits for the QEMU pid to disappear before it forgets a destroyed domain;
where PID 1 reaps lazily (containers, minimal VMs) every destroy stalls for 1-2 s on a zombie.
Running the daemons under a small subreaper that reaps at once removes that stall.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PIDFILES = {"virtlogd": "/run/virtlogd.pid", "libvirtd": "/run/libvirtd.pid"}


def _running(pidfile: str) -> bool:
    try:
        pid = int(Path(pidfile).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def daemons_running() -> bool:
    return all(_running(p) for p in PIDFILES.values())


def _reaper(commands: list[list[str]]) -> None:
    """Runs in the forked reaper: start the daemons, then reap every orphan they leave until none remain."""
    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for cmd in commands:
        subprocess.Popen(cmd, close_fds=True)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    os._exit(0)


def start_daemons(timeout: float = 20.0) -> str:
    """Start whichever of virtlogd/libvirtd is not running (as root). Returns what was done."""
    missing = [name for name, pidfile in PIDFILES.items() if not _running(pidfile)]
    if not missing:
        return "virtlogd and libvirtd already running"
    commands = []
    for name in missing:
        binary = shutil.which(name) or f"/usr/sbin/{name}"
        commands.append([binary, "-d"])
    if os.fork() == 0:
        try:
            if os.fork() == 0:
                _reaper(commands)
        finally:
            os._exit(0)
    os.wait()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemons_running() and os.path.exists("/run/libvirt/libvirt-sock"):
            return f"started {', '.join(missing)} under a reaping supervisor"
        time.sleep(0.2)
    raise RuntimeError(f"{', '.join(missing)} did not start within {timeout:.0f} s")
