"""Opening libvirt and finding/destroying our domains (the runner's only libvirt plumbing)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import libvirt

from backend.sandbox.domain import DOMAIN_PREFIX, METADATA_NS, DomainSpec, render_domain_xml
from backend.sandbox.image import ImageInfo
from backend.settings import get_settings

libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors arrive as exceptions


@contextmanager
def connection() -> Iterator[libvirt.virConnect]:
    conn = libvirt.open(get_settings().libvirt_uri)
    try:
        yield conn
    finally:
        with suppress(libvirt.libvirtError):
            conn.close()


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


def kill_quickly(conn: libvirt.virConnect, name: str, timeout: float = 2.0) -> bool:
    """SIGKILL the domain's QEMU and return once the process is dead.

    libvirt's destroy polls a dying QEMU every 200 ms; a finished run has nothing left to lose,
    so we kill it directly and let libvirt finish its bookkeeping (it forgets the domain within
    ~200 ms; `wait_name_free` covers reuse of a slot name). Falls back to a normal destroy.
    """
    pidfile = Path("/run/libvirt/qemu") / f"{name}.pid"
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return destroy_quietly(conn, name)
    if b"qemu" not in cmdline or f"guest={name},".encode() not in cmdline:
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


def owner_token() -> str:
    """Identifies this process (pid + start time, so a reused pid does not match)."""
    return f"{os.getpid()}:{_start_time(os.getpid())}"


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


def make_private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=False)
    # QEMU runs as an unprivileged user and must reach the per-run disks.
    path.chmod(0o755)
    parent = path.parent
    while parent != parent.parent:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)
        parent = parent.parent
    return path


# ---------------------------------------------------------------- virt type


_virt_lock = threading.Lock()
_virt_resolved: str | None = None


def probe_kvm(image: ImageInfo, timeout: float) -> tuple[bool, str]:
    """Boot the tiny initramfs under type='kvm' with a deadline; True only if it prints and powers off."""
    if not os.path.exists("/dev/kvm"):
        return False, "/dev/kvm missing"
    run_dir = get_settings().effective_run_dir
    work = make_private_dir(run_dir / f"{DOMAIN_PREFIX}probe-{uuid.uuid4().hex[:8]}")
    name = work.name
    try:
        for disk in ("job.img", "out.img"):
            with open(work / disk, "wb") as fh:
                fh.truncate(1024 * 1024)
        spec = DomainSpec(
            name=name,
            uuid=str(uuid.uuid4()),
            run_id="kvm-probe",
            image_hash=image.image_hash,
            virt_type="kvm",
            memory_mib=256,
            vcpus=1,
            kernel=image.kernel,
            initrd=image.initrd,
            root_disk=image.rootfs,
            job_disk=work / "job.img",
            output_disk=work / "out.img",
            console_log=work / "console.log",
            extra_cmdline="cleanroom.probe=1",
        )
        with connection() as conn:
            try:
                conn.createXML(render_domain_xml(spec), 0)
            except libvirt.libvirtError as exc:
                return False, f"kvm domain refused: {exc}"
            deadline = time.monotonic() + timeout
            try:
                while time.monotonic() < deadline:
                    if not domain_is_active(conn, name):
                        break
                    time.sleep(0.1)
            finally:
                destroy_quietly(conn, name)
        console = (
            (work / "console.log").read_text(errors="replace") if (work / "console.log").exists() else ""
        )
        if "CLEANROOM-PROBE-OK" in console:
            return True, "tiny guest booted under kvm"
        return False, f"tiny guest did not boot under kvm within {timeout:.0f} s"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def resolve_virt_type(image: ImageInfo | None, *, progress=None) -> str:
    """The virt type in use: forced by the setting, else probed once per process (kvm, falling back to qemu)."""
    global _virt_resolved
    setting = get_settings().virt_type
    if setting != "auto":
        return setting
    with _virt_lock:
        if _virt_resolved is None:
            if image is None:
                return "qemu"
            cache = get_settings().image_cache_dir / "virt-probe.json"
            key = f"{os.uname().release} {libvirt.getVersion()} {os.path.exists('/dev/kvm')}"
            try:
                cached = json.loads(cache.read_text())
            except (OSError, ValueError):
                cached = {}
            if cached.get("key") == key and cached.get("virt_type") in ("kvm", "qemu"):
                _virt_resolved = cached["virt_type"]
            else:
                ok, why = probe_kvm(image, get_settings().kvm_probe_seconds)
                _virt_resolved = "kvm" if ok else "qemu"
                cache.write_text(json.dumps({"key": key, "virt_type": _virt_resolved, "why": why}) + "\n")
                if progress:
                    progress(f"virt type: {_virt_resolved} ({why})")
        return _virt_resolved


def resolved_virt_type() -> str | None:
    setting = get_settings().virt_type
    return setting if setting != "auto" else _virt_resolved
