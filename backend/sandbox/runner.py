"""One run = one VM: restore a warm slot (or cold-boot), hand it the job disk, read back the output disk.

Saved states: one per slot, each from its own pristine template boot (kernel up, pandas/numpy/
matplotlib imported, no job ever seen). Restore keeps the saved name and UUID, so a slot's
domain is always `cleanroom-run-slot<N>-<image8>`; the run id travels in the job and in the
domain metadata. A slot serves one run at a time; when none is free (or none is saved) the
run cold-boots under its own name `cleanroom-run-<runid>`.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import secrets
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libvirt

from backend.hashing import sha256_bytes, sha256_json
from backend.sandbox import wire
from backend.sandbox.domain import DOMAIN_PREFIX, KERNEL_CMDLINE, TEMPLATE_PATH, DomainSpec, render_domain_xml
from backend.sandbox.image import ImageInfo, current_image
from backend.sandbox.libvirt_conn import (
    connection,
    destroy_quietly,
    domain_is_active,
    domain_owner,
    domains_owned_by,
    interface_count,
    kill_quickly,
    make_private_dir,
    our_domains,
    owner_alive,
    owner_token,
    resolve_virt_type,
    wait_name_free,
)
from backend.sandbox.models import (
    MAX_ACTIONS_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_OUTPUT_FILES,
    OutputFile,
    RejectedFile,
    RunLimits,
    SandboxResult,
    Timings,
    VmInfo,
)
from backend.settings import get_settings

GUEST_OVERHEAD_MIB = 512  # kernel, agent and tmpfs roots on top of the user's memory limit
RESTORE_READY_TIMEOUT = 60.0
COLLECT_GRACE_SECONDS = 45.0
POLL_SECONDS = 0.01
Progress = Callable[[str], None]


def _domain_memory_mib() -> int:
    return get_settings().max_memory_mib + GUEST_OVERHEAD_MIB


def _output_disk_bytes() -> int:
    return wire.output_disk_bytes(get_settings().stdout_cap_bytes, MAX_OUTPUT_BYTES, MAX_ACTIONS_BYTES)


def _job_disk_bytes() -> int:
    return get_settings().job_disk_mib * 1024 * 1024


# ---------------------------------------------------------------- saved-state slots


@dataclass(frozen=True)
class Slot:
    index: int
    image: ImageInfo
    virt_type: str

    @property
    def directory(self) -> Path:
        return self.image.directory / "states"

    @property
    def name(self) -> str:
        return f"{DOMAIN_PREFIX}slot{self.index}-{self.image.image_hash[:8]}"

    @property
    def state_path(self) -> Path:
        return self.directory / f"{self.virt_type}-slot{self.index}.save"

    @property
    def meta_path(self) -> Path:
        return self.directory / f"{self.virt_type}-slot{self.index}.json"

    def config_hash(self) -> str:
        return sha256_json(
            {
                "image": self.image.image_hash,
                "virt_type": self.virt_type,
                "memory_mib": _domain_memory_mib(),
                "vcpus": get_settings().max_vcpus,
                "job_disk": _job_disk_bytes(),
                "output_disk": _output_disk_bytes(),
                "template": sha256_bytes(TEMPLATE_PATH.read_bytes()),
                "cmdline": KERNEL_CMDLINE,
                "libvirt": libvirt.getVersion(),
            }
        )

    def saved_uuid(self) -> str | None:
        """The UUID of a usable saved state, or None when missing or made for another configuration."""
        try:
            meta = json.loads(self.meta_path.read_text())
        except (OSError, ValueError):
            return None
        if meta.get("config_hash") != self.config_hash() or not self.state_path.is_file():
            return None
        return meta.get("uuid")

    def discard(self) -> None:
        for path in (self.meta_path, self.state_path):
            path.unlink(missing_ok=True)


class SlotPool:
    """Which slots are in use: an flock per slot, so threads and other processes never share one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, int], int] = {}
        self._next = 0

    def _try_lock(self, slot: Slot) -> bool:
        key = (slot.image.image_hash, slot.index)
        with self._lock:
            if key in self._held:
                return False
            slot.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(slot.directory / f"slot{slot.index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._held[key] = fd
            return True

    def acquire(self, image: ImageInfo, virt_type: str) -> tuple[Slot, str] | None:
        # Round-robin: libvirt finishes forgetting the last killed domain while the next slot runs.
        count = get_settings().saved_state_slots
        with self._lock:
            first = self._next
        for offset in range(count):
            index = (first + offset) % count
            slot = Slot(index, image, virt_type)
            if not slot.saved_uuid() or not self._try_lock(slot):
                continue
            saved_uuid = slot.saved_uuid()  # re-read under the lock
            if saved_uuid:
                with self._lock:
                    self._next = (index + 1) % count
                return slot, saved_uuid
            self.release(slot)
        return None

    def hold(self, slot: Slot) -> bool:
        return self._try_lock(slot)

    def release(self, slot: Slot) -> None:
        with self._lock:
            fd = self._held.pop((slot.image.image_hash, slot.index), None)
        if fd is not None:
            os.close(fd)  # closing drops the flock


_slots = SlotPool()


def _spec(name: str, uuid_: str, run_id: str, image: ImageInfo, virt_type: str, workdir: Path) -> DomainSpec:
    return DomainSpec(
        name=name,
        uuid=uuid_,
        run_id=run_id,
        image_hash=image.image_hash,
        virt_type=virt_type,
        memory_mib=_domain_memory_mib(),
        vcpus=get_settings().max_vcpus,
        kernel=image.kernel,
        initrd=image.initrd,
        root_disk=image.rootfs,
        job_disk=workdir / "job.img",
        output_disk=workdir / "out.img",
        console_log=workdir / "console.log",
        owner=owner_token(),
    )


def _make_template(slot: Slot, progress: Progress) -> None:
    """Boot a pristine guest, wait until it is warm, save it. Never after a job."""
    slot.directory.mkdir(parents=True, exist_ok=True)
    slot.directory.chmod(0o755)
    slot.discard()
    workdir = slot.directory / f"template-{slot.virt_type}-slot{slot.index}"
    shutil.rmtree(workdir, ignore_errors=True)
    make_private_dir(workdir)
    (workdir / "owner").write_text(owner_token())
    uuid_ = str(uuid.uuid4())
    started = time.monotonic()
    try:
        with open(workdir / "job.img", "wb") as fh:
            fh.truncate(_job_disk_bytes())
        wire.create_output_disk(workdir / "out.img", _output_disk_bytes())
        spec = _spec(slot.name, uuid_, "template", slot.image, slot.virt_type, workdir)
        with connection() as conn:
            destroy_quietly(conn, slot.name)
            wait_name_free(conn, slot.name)
            dom = conn.createXML(render_domain_xml(spec), 0)
            try:
                deadline = time.monotonic() + get_settings().cold_boot_timeout_seconds
                while wire.read_block0(workdir / "out.img", wire.WARM_MAGIC) is None:
                    if time.monotonic() > deadline or not domain_is_active(conn, slot.name):
                        raise RuntimeError(f"template guest for slot {slot.index} never became warm")
                    time.sleep(0.1)
                tmp = slot.state_path.with_suffix(".partial")
                tmp.unlink(missing_ok=True)
                dom.saveFlags(str(tmp), None, libvirt.VIR_DOMAIN_SAVE_RUNNING)
                tmp.rename(slot.state_path)
            finally:
                destroy_quietly(conn, slot.name)
        slot.meta_path.write_text(
            json.dumps(
                {
                    "uuid": uuid_,
                    "name": slot.name,
                    "config_hash": slot.config_hash(),
                    "image_hash": slot.image.image_hash,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
            + "\n"
        )
        size_mib = slot.state_path.stat().st_size / 1048576
        progress(
            f"saved warm state for slot {slot.index} in {time.monotonic() - started:.0f} s ({size_mib:.0f} MiB)"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def prepare_saved_states(progress: Progress = print, *, force: bool = False) -> int:
    """Make the warm saved state of every slot that lacks a current one. Returns how many were made."""
    image = current_image()
    if image is None:
        raise RuntimeError("guest image not built: run `cleanroom image build`")
    virt_type = resolve_virt_type(image, progress=progress)
    todo = []
    for index in range(get_settings().saved_state_slots):
        slot = Slot(index, image, virt_type)
        if (force or not slot.saved_uuid()) and _slots.hold(slot):
            todo.append(slot)
    if not todo:
        progress("saved warm states up to date")
        return 0
    progress(f"booting {len(todo)} warm template guest(s) under {virt_type} to save their state …")

    def make(slot: Slot) -> None:
        try:
            _make_template(slot, progress)
        finally:
            _slots.release(slot)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(make, slot) for slot in todo]:
            future.result()
    return len(todo)


# ---------------------------------------------------------------- standby pool


@dataclass
class Standby:
    """A slot restored ahead of any request, idling until its job disk gets a job. Used once."""

    slot: Slot
    run_id: str
    workdir: Path
    restore_ms: float
    ready_since: float


class StandbyPool:
    """Opt-in for long-lived services: keeps `standby_vms` restored guests waiting for a job.

    Each standby is a fresh restore of a pristine saved state, with its own per-run disks, and
    serves exactly one run; the restore just happens before the request instead of after it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: list[Standby] = []
        self._want = 0
        self._thread: threading.Thread | None = None
        self._registered = False
        self._active_runs = 0

    def run_started(self) -> None:
        with self._cond:
            self._active_runs += 1

    def run_finished(self) -> None:
        with self._cond:
            self._active_runs -= 1
            self._cond.notify_all()

    @property
    def active(self) -> bool:
        return self._want > 0

    def start(self, count: int | None = None) -> None:
        with self._cond:
            self._want = get_settings().standby_vms if count is None else count
            if self._want > 0 and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._loop, name="cleanroom-standby", daemon=True)
                self._thread.start()
            if not self._registered:
                atexit.register(self.stop)
                self._registered = True
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._want = 0
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout=60)
        with self._cond:
            leftovers, self._ready = self._ready, []
        for standby in leftovers:
            self._discard(standby)

    def take(self, image: ImageInfo, virt_type: str) -> Standby | None:
        with self._cond:
            for standby in self._ready:
                if standby.slot.image.image_hash == image.image_hash and standby.slot.virt_type == virt_type:
                    self._ready.remove(standby)
                    self._cond.notify_all()
                    return standby
        return None

    def size(self) -> int:
        with self._cond:
            return len(self._ready)

    def _discard(self, standby: Standby) -> None:
        try:
            with connection() as conn:
                kill_quickly(conn, standby.slot.name)
        finally:
            shutil.rmtree(standby.workdir, ignore_errors=True)
            _slots.release(standby.slot)

    def _loop(self) -> None:
        while True:
            with self._cond:
                # Refill between runs: on a small host a restore next to a run slows the run.
                while self._want > 0 and (
                    len(self._ready) >= self._want or (self._active_runs > 0 and self._ready)
                ):
                    self._cond.wait(timeout=1.0)
                if self._want <= 0:
                    return
            standby = None
            try:
                standby = self._restore_one()
            except Exception:  # noqa: BLE001 - a failed standby just means on-demand restores
                standby = None
            if standby is None:
                time.sleep(0.5)
                continue
            with self._cond:
                if self._want > len(self._ready):
                    self._ready.append(standby)
                    standby = None
            if standby is not None:
                self._discard(standby)

    def _restore_one(self) -> Standby | None:
        image = current_image()
        if image is None or not get_settings().use_saved_state:
            return None
        virt_type = resolve_virt_type(image)
        acquired = _slots.acquire(image, virt_type)
        if acquired is None:
            return None
        slot, slot_uuid = acquired
        run_id = uuid.uuid4().hex[:16]
        workdir = None
        try:
            workdir = make_private_dir(get_settings().effective_run_dir / f"{DOMAIN_PREFIX}{run_id}")
            (workdir / "owner").write_text(owner_token())
            with open(workdir / "job.img", "wb") as fh:
                fh.truncate(_job_disk_bytes())
            wire.create_output_disk(workdir / "out.img", _output_disk_bytes())
            xml = render_domain_xml(_spec(slot.name, slot_uuid, run_id, image, virt_type, workdir))
            began = time.monotonic()
            with connection() as conn:
                wait_name_free(conn, slot.name)
                conn.restoreFlags(str(slot.state_path), xml, libvirt.VIR_DOMAIN_SAVE_RUNNING)
            now = time.monotonic()
            return Standby(slot, run_id, workdir, round((now - began) * 1000, 1), now)
        except BaseException:
            with connection() as conn:
                destroy_quietly(conn, slot.name)
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            _slots.release(slot)
            raise


_standby = StandbyPool()


def start_standby_pool(count: int | None = None) -> None:
    """Keep `count` (default: setting `standby_vms`) restored guests ready; for long-lived services."""
    _standby.start(count)


def stop_standby_pool() -> None:
    _standby.stop()


def standby_ready() -> int:
    return _standby.size()


# ---------------------------------------------------------------- one run


def _collect_inputs(input_dir: Path | None) -> list[tuple[str, Path]]:
    if input_dir is None:
        return []
    inputs = []
    for path in sorted(Path(input_dir).rglob("*")):
        if path.is_symlink():
            continue
        if path.is_file():
            inputs.append((path.relative_to(input_dir).as_posix(), path))
    return inputs


def _error(message: str, started: float, vm: VmInfo | None = None) -> SandboxResult:
    return SandboxResult(
        status="error",
        error=message,
        timings_ms=Timings(total=round((time.monotonic() - started) * 1000, 1)),
        vm=vm or VmInfo(nics=None),
    )


def run_code(
    code: str,
    *,
    input_dir: Path | None,
    out_dir: Path,
    limits: RunLimits | None = None,
    read_actions: bool = True,
    force_cold_boot: bool = False,
) -> SandboxResult:
    """Run `code` in a fresh VM and return what came out. Thread-safe; never raises for run problems."""
    return _run(
        code,
        input_dir=input_dir,
        out_dir=out_dir,
        limits=limits,
        read_actions=read_actions,
        force_cold_boot=force_cold_boot,
    )


def _run(
    code: str,
    *,
    input_dir: Path | None,
    out_dir: Path,
    limits: RunLimits | None,
    read_actions: bool,
    force_cold_boot: bool = False,
    positive_control_nic: bool = False,
) -> SandboxResult:
    _standby.run_started()
    try:
        return _run_once(
            code,
            input_dir=input_dir,
            out_dir=out_dir,
            limits=limits,
            read_actions=read_actions,
            force_cold_boot=force_cold_boot,
            positive_control_nic=positive_control_nic,
        )
    finally:
        _standby.run_finished()


def _run_once(
    code: str,
    *,
    input_dir: Path | None,
    out_dir: Path,
    limits: RunLimits | None,
    read_actions: bool,
    force_cold_boot: bool,
    positive_control_nic: bool,
) -> SandboxResult:
    started = time.monotonic()
    settings = get_settings()
    limits = (limits or RunLimits()).clamped()
    run_id = uuid.uuid4().hex[:16]
    image = current_image()
    if image is None:
        return _error("guest image not built: run `cleanroom image build`", started)
    try:
        virt_type = resolve_virt_type(image)
    except Exception as exc:  # noqa: BLE001
        return _error(f"cannot determine the virt type: {exc}", started)
    vm = VmInfo(virt_type=virt_type, image_hash=image.image_hash, run_id=run_id)
    slot_uuid = None
    slot = None
    standby = None
    fast_path = settings.use_saved_state and not force_cold_boot and not positive_control_nic
    if fast_path and _standby.active:
        standby = _standby.take(image, virt_type)
    if standby is not None:
        slot, run_id = standby.slot, standby.run_id
        vm.run_id = run_id
    elif fast_path:
        acquired = _slots.acquire(image, virt_type)
        if acquired:
            slot, slot_uuid = acquired
    workdir: Path | None = None
    name = slot.name if slot else f"{DOMAIN_PREFIX}{run_id}"
    vm.domain_name = name
    try:
        if standby is not None:
            workdir = standby.workdir
        else:
            workdir = make_private_dir(settings.effective_run_dir / f"{DOMAIN_PREFIX}{run_id}")
            (workdir / "owner").write_text(owner_token())
        nonce = secrets.token_hex(16)
        job = {
            "run_id": run_id,
            "nonce": nonce,
            "code": code,
            "seed": secrets.token_hex(64),
            "time_ns": time.time_ns(),
            "network": positive_control_nic,
            "limits": {
                "wall_seconds": limits.wall_seconds,
                "memory_mib": limits.memory_mib,
                "vcpus": limits.vcpus,
                "stdout_cap": settings.stdout_cap_bytes,
                "max_files": MAX_OUTPUT_FILES,
                "max_total_bytes": MAX_OUTPUT_BYTES,
                "max_actions_bytes": MAX_ACTIONS_BYTES,
                "max_processes": 256,
            },
        }
        try:
            inputs = _collect_inputs(input_dir)
        except OSError as exc:
            return _error(f"cannot read inputs: {exc}", started, vm)
        if standby is None:
            wire.create_output_disk(workdir / "out.img", _output_disk_bytes())
        with connection() as conn:
            try:
                launched = time.monotonic()
                job["time_ns"] = time.time_ns()
                dom = None
                if standby is not None:
                    dom = conn.lookupByName(name)
                    if not dom.isActive():
                        raise RuntimeError("the standby guest is no longer running")
                    vm.restored = vm.standby = True
                    vm.restore_ms = standby.restore_ms
                    wire.write_job_disk(workdir / "job.img", _job_disk_bytes(), job, inputs, in_place=True)
                else:
                    wire.write_job_disk(workdir / "job.img", _job_disk_bytes(), job, inputs)
                if dom is None and slot and slot_uuid:
                    xml = render_domain_xml(_spec(name, slot_uuid, run_id, image, virt_type, workdir))
                    wait_name_free(conn, name)
                    try:
                        conn.restoreFlags(str(slot.state_path), xml, libvirt.VIR_DOMAIN_SAVE_RUNNING)
                        dom = conn.lookupByName(name)
                        vm.restored = True
                        vm.restore_ms = round((time.monotonic() - launched) * 1000, 1)
                    except libvirt.libvirtError:
                        # A state libvirt refuses is useless: drop it (unless the name was merely
                        # taken by a stray domain) and cold-boot this run.
                        if not destroy_quietly(conn, name):
                            slot.discard()
                        _slots.release(slot)
                        slot = None
                        name = vm.domain_name = f"{DOMAIN_PREFIX}{run_id}"
                if dom is None:
                    spec = _spec(name, str(uuid.uuid4()), run_id, image, virt_type, workdir)
                    xml = render_domain_xml(spec, positive_control_nic=positive_control_nic)
                    dom = conn.createXML(xml, 0)
                vm.nics = interface_count(dom.XMLDesc(0))
                return _wait_and_collect(
                    conn, dom, name, workdir, job, vm, limits, out_dir, read_actions, started, launched
                )
            finally:
                kill_quickly(conn, name)
    except Exception as exc:  # noqa: BLE001 - every failure becomes an `error` result
        return _error(f"{type(exc).__name__}: {exc}", started, vm)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        if slot is not None:
            _slots.release(slot)


def _wait_and_collect(
    conn: libvirt.virConnect,
    dom: libvirt.virDomain,
    name: str,
    workdir: Path,
    job: dict[str, Any],
    vm: VmInfo,
    limits: RunLimits,
    out_dir: Path,
    read_actions: bool,
    started: float,
    launched: float,
) -> SandboxResult:
    out_disk = workdir / "out.img"
    ready_at: float | None = None
    ready_timeout = RESTORE_READY_TIMEOUT if vm.restored else get_settings().cold_boot_timeout_seconds
    deadline = launched + ready_timeout
    guest: wire.GuestResult | None = None
    gone = False
    while True:
        now = time.monotonic()
        if ready_at is None:
            ready = wire.read_block0(out_disk, wire.READY_MAGIC)
            if ready is not None and ready.get("nonce") == job["nonce"]:
                ready_at = now
                deadline = now + limits.wall_seconds + COLLECT_GRACE_SECONDS
        guest = wire.read_result(out_disk)
        if guest is not None or gone:
            break
        if now > deadline:
            break
        if not domain_is_active(conn, name):
            gone = True  # read the disk once more: the guest may have written just before power-off
            continue
        time.sleep(POLL_SECONDS)
    finished = time.monotonic()
    vm.guest_interfaces = []
    timings = Timings(start=round(((ready_at or finished) - launched) * 1000, 1))
    if guest is None:
        console = _console_tail(workdir)
        if ready_at is not None and not gone:
            # The agent enforces the wall limit itself; silence past it plus a grace is our failure.
            result = _error(f"the guest stopped responding after the code started{console}", started, vm)
        else:
            what = "powered off without a result" if gone else "never became ready"
            result = _error(f"the guest {what}{console}", started, vm)
        return result
    if guest.record.get("agent_error"):
        return _error(f"guest agent failed: {_short(guest.record['agent_error'], 2000)}", started, vm)
    if guest.record.get("nonce") != job["nonce"]:
        return _error("the guest's result belongs to another job", started, vm)
    result = _interpret(guest, job, vm, out_dir, read_actions)
    guest_timings = guest.record.get("timings_ms") or {}
    timings.execute = _number(guest_timings.get("execute"))
    timings.collect = round((time.monotonic() - finished) * 1000, 1) + _number(guest_timings.get("collect"))
    timings.total = round((time.monotonic() - started) * 1000, 1)
    result.timings_ms = timings
    return result


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _console_tail(workdir: Path) -> str:
    try:
        text = (workdir / "console.log").read_text(errors="replace")[-1500:].strip()
    except OSError:
        return ""
    return f"; console: {text}" if text else ""


def _safe_name(name: Any) -> bool:
    if not isinstance(name, str) or name in ("", ".", "..") or name == "actions.json":
        return False
    if "/" in name or "\\" in name or len(name.encode("utf-8", "replace")) > 200:
        return False
    return not any(ord(c) < 32 or ord(c) == 127 for c in name)


def _short(value: Any, limit: int = 300) -> str:
    return str(value)[:limit]


def _interpret(
    guest: wire.GuestResult, job: dict, vm: VmInfo, out_dir: Path, read_actions: bool
) -> SandboxResult:
    record = guest.record
    if record.get("agent_error"):
        return SandboxResult(
            status="error", error=f"guest agent failed: {_short(record['agent_error'], 2000)}", vm=vm
        )
    interfaces = record.get("interfaces")
    vm.guest_interfaces = [_short(i, 32) for i in interfaces][:64] if isinstance(interfaces, list) else []
    cap = job["limits"]["stdout_cap"]
    stdout = guest.blob(0, cap).decode("utf-8", "replace")
    stderr = guest.blob(1, cap).decode("utf-8", "replace")
    truncated = bool(record.get("stdout_truncated"))
    if truncated:
        stdout += f"\n[output truncated: only the first {cap} bytes are shown]\n"
    if record.get("stderr_truncated"):
        stderr += f"\n[error output truncated: only the first {cap} bytes are shown]\n"
    exit_code = record.get("exit_code")
    exit_code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    if record.get("timed_out"):
        status = "timed_out"
    elif _number(record.get("oom_kills")) > 0:
        status = "out_of_memory"
    elif exit_code == 0:
        status = "succeeded"
    else:
        status = "failed"
    result = SandboxResult(
        status=status, exit_code=exit_code, stdout=stdout, stderr=stderr, stdout_truncated=truncated, vm=vm
    )
    rejected = record.get("rejected")
    for item in rejected if isinstance(rejected, list) else []:
        if isinstance(item, dict) and len(result.rejected_files) < 120:
            result.rejected_files.append(
                RejectedFile(name=_short(item.get("name")), reason=_short(item.get("reason")))
            )
    if record.get("actions_present"):
        raw = guest.blob(2, MAX_ACTIONS_BYTES)
        if not read_actions:
            result.actions_discarded = True  # never parsed
        else:
            result.actions, problem = _parse_actions(raw)
            if problem:
                result.rejected_files.append(RejectedFile(name="actions.json", reason=problem))
    _write_files(guest, record, out_dir, result)
    return result


def _parse_actions(raw: bytes) -> tuple[list | None, str | None]:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"malformed actions.json: {_short(exc, 200)}"
    if isinstance(value, dict) and isinstance(value.get("actions"), list):
        value = value["actions"]
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        return None, "malformed actions.json: expected a list of objects"
    limit = get_settings().max_actions_per_run
    if len(value) > limit:
        return None, f"actions.json proposes {len(value)} actions; at most {limit} are allowed"
    return value, None


def _write_files(guest: wire.GuestResult, record: dict, out_dir: Path, result: SandboxResult) -> None:
    files = record.get("files")
    files = files if isinstance(files, list) else []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    total = 0
    seen: set[str] = set()
    for index, item in enumerate(files):
        name = item.get("name") if isinstance(item, dict) else None
        size = item.get("size") if isinstance(item, dict) else None
        reason = None
        if not _safe_name(name) or name in seen:
            reason = "unsafe or duplicate name"
        elif len(result.files) >= MAX_OUTPUT_FILES:
            reason = f"over the limit of {MAX_OUTPUT_FILES} files"
        elif not isinstance(size, int) or size < 0 or total + size > MAX_OUTPUT_BYTES:
            reason = f"over the {MAX_OUTPUT_BYTES} byte total output limit"
        if reason:
            result.rejected_files.append(RejectedFile(name=_short(name), reason=reason))
            continue
        data = guest.blob(3 + index, MAX_OUTPUT_BYTES - total)
        if len(data) != size:
            result.rejected_files.append(
                RejectedFile(name=_short(name), reason="size does not match the record")
            )
            continue
        try:
            fd = os.open(out_dir / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            result.rejected_files.append(
                RejectedFile(name=name, reason=f"cannot write to the output folder: {exc}")
            )
            continue
        seen.add(name)
        total += size
        result.files.append(OutputFile(name=name, size=size, sha256=sha256_bytes(data)))


# ---------------------------------------------------------------- service hooks


def recover_leftovers() -> list[str]:
    """Destroy leftover `cleanroom-run-*` domains and delete per-run files (service start).

    A leftover is one whose owning process is gone; runs of another live process are left alone.
    """
    removed: list[str] = []
    with connection() as conn:
        for dom in conn.listAllDomains():
            name = dom.name()
            if (
                name.startswith(DOMAIN_PREFIX)
                and not owner_alive(domain_owner(dom))
                and destroy_quietly(conn, name)
            ):
                removed.append(f"domain {name}")
    for path in leftover_run_files(include_live=False):
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        removed.append(f"files {path}")
    image = current_image()
    states = image.directory / "states" if image else None
    if states is not None and states.is_dir():
        for path in [*states.glob("template-*"), *states.glob("*.partial")]:
            if path.is_dir() and owner_alive(_read_owner(path)):
                continue
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(f"files {path}")
    return removed


def _read_owner(path: Path) -> str | None:
    try:
        return (path / "owner").read_text()
    except OSError:
        return None


def leftover_run_files(include_live: bool = True, owner: str | None = None) -> list[Path]:
    """Per-run directories: all of them, only those of dead processes, or only those of `owner`."""
    run_dir = get_settings().effective_run_dir
    if not run_dir.is_dir():
        return []
    found = []
    for path in sorted(run_dir.iterdir()):
        if not path.name.startswith(DOMAIN_PREFIX):
            continue
        path_owner = _read_owner(path)
        if owner is not None and path_owner != owner:
            continue
        if not include_live and owner_alive(path_owner):
            continue
        found.append(path)
    return found


def running_domains(owner: str | None = None) -> list[str]:
    """Our domains in libvirt (only those run by `owner`, when given)."""
    with connection() as conn:
        return domains_owned_by(conn, owner) if owner else our_domains(conn)


def health() -> dict[str, Any]:
    image = current_image()
    info: dict[str, Any] = {
        "virt_type": None,
        "image": {"hash": image.image_hash, "path": str(image.directory)} if image else None,
        "saved_state": {"enabled": get_settings().use_saved_state, "slots": 0, "ready": 0},
        "running_vms": None,
    }
    try:
        info["running_vms"] = len(running_domains())
    except libvirt.libvirtError as exc:
        info["libvirt_error"] = str(exc)
    if image is not None:
        virt_type = resolve_virt_type(image)
        info["virt_type"] = virt_type
        slots = get_settings().saved_state_slots
        ready = sum(1 for i in range(slots) if Slot(i, image, virt_type).saved_uuid())
        info["saved_state"].update(slots=slots, ready=ready, standby_ready=_standby.size())
    return info
