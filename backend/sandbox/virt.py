"""Which virt type runs the guests: the setting, else probed once (kvm if a tiny guest boots, else qemu/TCG).

Some hosts offer a /dev/kvm that only runs specially built guest kernels while libvirt still lists kvm;
only a real boot tells. The answer is cached per host kernel + libvirt version.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import libvirt

from backend import filemodes
from backend.sandbox.domain import DOMAIN_PREFIX, RUN_FILES, DomainSpec, render_domain_xml
from backend.sandbox.image import ImageInfo
from backend.sandbox.libvirt_conn import connection, destroy_quietly, domain_is_active
from backend.settings import get_settings

_virt_lock = threading.Lock()
_virt_resolved: str | None = None


def probe_kvm(image: ImageInfo, timeout: float) -> tuple[bool, str]:
    """Boot the tiny initramfs under type='kvm' with a deadline; True only if it prints and powers off."""
    if not os.path.exists("/dev/kvm"):
        return False, "/dev/kvm missing"
    lease = filemodes.lease_cold_identity()  # the probe's QEMU runs as a cold-boot guest id, as a cold VM's
    ids = lease.ids if lease is not None else None
    work: Path | None = None
    try:
        work = probe_workdir(ids)
        return _boot_probe(image, work, ids, timeout)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        if lease is not None:
            lease.release()


def _boot_probe(
    image: ImageInfo, work: Path, ids: tuple[int, int] | None, timeout: float
) -> tuple[bool, str]:
    name = work.name
    spec = replace(
        DomainSpec.for_run(name, str(uuid.uuid4()), "kvm-probe", image, "kvm", work, owner="", guest_ids=ids),
        memory_mib=256,
        vcpus=1,
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
    console = (work / "console.log").read_text(errors="replace") if (work / "console.log").exists() else ""
    if "CLEANROOM-PROBE-OK" in console:
        return True, "tiny guest booted under kvm"
    return False, f"tiny guest did not boot under kvm within {timeout:.0f} s"


def probe_workdir(ids: tuple[int, int] | None) -> Path:
    """The probe guest's per-run directory in the run directory (`settings.effective_run_dir`, which only
    picks folders QEMU can pass), made as a run's is: 0710 with the guest's group, its two 1 MiB disks and
    console log 0600 and the guest's own (backend/filemodes.py). No folder above the run directory changes."""
    run_dir = get_settings().effective_run_dir
    work = filemodes.guest_workdir(run_dir / f"{DOMAIN_PREFIX}probe-{uuid.uuid4().hex[:8]}", ids)
    for file in RUN_FILES:
        filemodes.private_file(work / file, ids=ids)
    for disk in ("job.img", "out.img"):
        os.truncate(work / disk, 1024 * 1024)
    return work


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
