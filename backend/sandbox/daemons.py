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


def forget_dead_guests(state_dir: Path | None = None) -> list[str]:
    """Before libvirtd starts: drop its records of our guests whose QEMU is gone. libvirtd killed while it ran
    a guest (the soak restarts it) can leave a record naming a dead QEMU; the next libvirtd then holds that
    domain `paused` for ever, refuses to destroy it ("cannot acquire state change lock"), and since a slot's
    restore always takes the slot's domain name, that slot's runs fail until someone cleans by hand. Only
    `cleanroom-run-*` records go, and only those whose pid is no live QEMU of that guest
    (`libvirt_conn.domain_qemu_pid`, the check `kill_quickly` makes). Returns the domains forgotten."""
    from backend.sandbox.domain import DOMAIN_PREFIX
    from backend.sandbox.libvirt_conn import QEMU_STATE_DIR, domain_qemu_pid

    state_dir = state_dir or QEMU_STATE_DIR
    forgotten = []
    for record in sorted(state_dir.glob(f"{DOMAIN_PREFIX}*.xml")):
        if domain_qemu_pid(record.stem, state_dir) is not None:
            continue  # its QEMU lives: libvirtd reconnects to it
        record.unlink(missing_ok=True)
        record.with_suffix(".pid").unlink(missing_ok=True)
        forgotten.append(record.stem)
    return forgotten


def start_daemons(timeout: float = 20.0) -> str:
    """Start whichever of virtlogd/libvirtd is not running (as root). Returns what was done."""
    missing = [name for name, pidfile in PIDFILES.items() if not _running(pidfile)]
    if not missing:
        return "virtlogd and libvirtd already running"
    forgotten = forget_dead_guests() if "libvirtd" in missing else []
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
            done = f"started {', '.join(missing)} under a reaping supervisor"
            return done + (
                f"; forgot guests whose QEMU was gone: {', '.join(forgotten)}" if forgotten else ""
            )
        time.sleep(0.2)
    raise RuntimeError(f"{', '.join(missing)} did not start within {timeout:.0f} s")
