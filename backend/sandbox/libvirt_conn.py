"""Opening libvirt, finding and destroying our domains, and who owns them (the sandbox's libvirt plumbing)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import libvirt

from backend.sandbox.domain import DOMAIN_PREFIX, METADATA_NS
from backend.settings import get_settings

libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors arrive as exceptions


def open_connection() -> libvirt.virConnect:
    return libvirt.open(get_settings().libvirt_uri)


def close_quietly(conn: libvirt.virConnect) -> None:
    with suppress(libvirt.libvirtError):
        conn.close()


@contextmanager
def connection() -> Iterator[libvirt.virConnect]:
    conn = open_connection()
    try:
        yield conn
    finally:
        close_quietly(conn)


def destroy_quietly(conn: libvirt.virConnect, name: str) -> bool:
    try:
        dom = conn.lookupByName(name)
    except libvirt.libvirtError:
        return False
    with suppress(libvirt.libvirtError):
        dom.destroy()
    with suppress(libvirt.libvirtError):  # a transient domain vanishes on destroy; a defined one lingers
        dom.undefine()
    return True


QEMU_STATE_DIR = Path(
    "/run/libvirt/qemu"
)  # the system driver's record (<name>.xml, <name>.pid) of each domain


def domain_qemu_pid(name: str, state_dir: Path = QEMU_STATE_DIR) -> int | None:
    """The pid of the live QEMU that runs domain `name` (its pid file names it and that process's command
    line is QEMU's for this guest), or None: no record, or its pid gone or taken by another process."""
    try:
        pid = int((state_dir / f"{name}.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    if b"qemu" not in cmdline or f"guest={name},".encode() not in cmdline:
        return None
    return pid


def kill_quickly(conn: libvirt.virConnect, name: str, timeout: float = 2.0) -> bool:
    """SIGKILL the domain's QEMU and return once the process is dead.

    libvirt's destroy polls a dying QEMU every 200 ms; a finished run has nothing left to lose,
    so we kill it directly and let libvirt finish its bookkeeping (it forgets the domain within
    ~200 ms; `wait_name_free` covers reuse of a slot name). Falls back to a normal destroy.
    """
    pid = domain_qemu_pid(name)
    if pid is None:
        return destroy_quietly(conn, name)
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except (OSError, IndexError):
            return True
        time.sleep(0.002)
    return destroy_quietly(conn, name)


def wait_name_free(conn: libvirt.virConnect, name: str, timeout: float = 5.0) -> bool:
    """Wait until libvirt has forgotten a (killed) domain, so its name can be restored again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn.lookupByName(name)
        except libvirt.libvirtError:
            return True
        time.sleep(0.005)
    return False


def domain_is_active(conn: libvirt.virConnect, name: str) -> bool:
    try:
        return bool(conn.lookupByName(name).isActive())
    except libvirt.libvirtError:
        return False


def our_domains(conn: libvirt.virConnect) -> list[str]:
    return sorted(d.name() for d in conn.listAllDomains() if d.name().startswith(DOMAIN_PREFIX))


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def qemu_process(name: str) -> tuple[int | None, float | None]:
    """The pid of the domain's QEMU and when the kernel started it (unix seconds), or Nones (a session
    libvirt keeps its pid files elsewhere)."""
    try:
        pid = int((Path("/run/libvirt/qemu") / f"{name}.pid").read_text().strip())
        ticks = _start_time(pid)
        uptime = float(Path("/proc/uptime").read_text().split()[0])  # 10 ms steps (btime: whole seconds)
    except (OSError, ValueError, IndexError):
        return None, None
    if ticks is None:
        return pid, None
    return pid, time.time() - (uptime - int(ticks) / os.sysconf("SC_CLK_TCK"))


def owner_token(pid: int | None = None) -> str:
    """Identifies this process, or the process `pid` (pid + start time, so a reused pid does not match)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def owner_alive(token: str | None) -> bool:
    if not token or ":" not in token:
        return False
    pid, started = token.split(":", 1)
    return pid.isdigit() and _start_time(int(pid)) == started


def domain_owner(dom: libvirt.virDomain) -> str | None:
    try:
        xml = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS)
    except libvirt.libvirtError:
        return None
    match = re.search(r"owner=[\"']([^\"']*)[\"']", xml)
    return match.group(1) if match else None


def domains_owned_by(conn: libvirt.virConnect, token: str) -> list[str]:
    return sorted(
        d.name()
        for d in conn.listAllDomains()
        if d.name().startswith(DOMAIN_PREFIX) and domain_owner(d) == token
    )


def interface_count(xml: str) -> int:
    return len(re.findall(r"<interface\b", xml))
