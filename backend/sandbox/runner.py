"""One run = one fresh VM: a standby guest if one waits, else a restored slot, else a cold boot.

Whichever it is, one `GuestVM` carries the run from its job disk to its kill, and `output` reads
what came back. The run id travels in the job and in the domain metadata (a restored domain keeps
its slot's name); a cold-booted run's domain is `cleanroom-run-<runid>`.
"""

from __future__ import annotations

import time
from pathlib import Path

import libvirt

from backend.sandbox import wire
from backend.sandbox.image import ImageInfo, current_image
from backend.sandbox.models import RunLimits, SandboxResult, VmInfo
from backend.sandbox.output import error_result, interpret, run_timings
from backend.sandbox.slots import slot_pool
from backend.sandbox.standby import standby_pool
from backend.sandbox.virt import resolve_virt_type
from backend.sandbox.vm import GuestFailure, GuestVM
from backend.settings import get_settings


def run_code(
    code: str,
    *,
    input_dir: Path | None,
    out_dir: Path,
    limits: RunLimits | None = None,
    read_actions: bool = True,
    force_cold_boot: bool = False,
    carry_dir: Path | None = None,
    started_after: float | None = None,
) -> SandboxResult:
    """Run `code` in a fresh VM and return what came out. Thread-safe; never raises for run problems.
    A flow's step passes `carry_dir` (what earlier steps handed on: /work/flow in the guest, read-only) and
    `started_after` (when the previous step's VM was gone: no waiting guest older than that is used)."""
    return _run(
        code,
        input_dir,
        out_dir,
        limits,
        read_actions=read_actions,
        force_cold_boot=force_cold_boot,
        carry_dir=carry_dir,
        started_after=started_after,
    )


def _run(
    code: str,
    input_dir: Path | None,
    out_dir: Path,
    limits: RunLimits | None,
    *,
    read_actions: bool,
    force_cold_boot: bool = False,
    positive_control_nic: bool = False,  # the isolation self-test's control run only
    positive_control_unfiltered: bool = False,  # the VM suite's control: user code without the syscall filter
    carry_dir: Path | None = None,
    started_after: float | None = None,
) -> SandboxResult:
    started = time.monotonic()
    limits = (limits or RunLimits()).clamped()
    image = current_image()
    if image is None:
        return error_result("guest image not built: run `cleanroom image build`", started)
    try:
        virt_type = resolve_virt_type(image)
    except Exception as exc:  # noqa: BLE001
        return error_result(f"cannot determine the virt type: {exc}", started)
    try:
        inputs = wire.input_files(input_dir)
        carried = wire.input_files(carry_dir)
    except OSError as exc:
        info = VmInfo(virt_type=virt_type, image_hash=image.image_hash)
        return error_result(f"cannot read inputs: {exc}", started, info)
    fast = get_settings().use_saved_state and not force_cold_boot and not positive_control_nic
    with standby_pool.run():
        vm = _choose(image, virt_type, fast=fast, nic=positive_control_nic, started_after=started_after)
        vm.unfiltered_control = positive_control_unfiltered
        try:
            with vm:
                _start(vm, code, limits, inputs, carried)
                guest = vm.wait(limits)
                result = interpret(guest, vm.nonce, vm.info(), out_dir, read_actions)
                result.timings_ms = run_timings(guest.record, vm.launched, vm.ready_at, vm.finished, started)
                result.timings_ms.ready_unix_ms = round(vm.ready_unix * 1000, 1) if vm.ready_unix else None
                return result
        except Exception as exc:  # noqa: BLE001 - every failure becomes an `error` result
            message = str(exc) if isinstance(exc, GuestFailure) else f"{type(exc).__name__}: {exc}"
            return error_result(message, started, vm.info())


def _choose(
    image: ImageInfo, virt_type: str, *, fast: bool, nic: bool, started_after: float | None = None
) -> GuestVM:
    """A standby guest already restored, else a free slot to restore, else a cold boot."""
    if fast:
        if standby := standby_pool.take(image, virt_type, started_after):
            return standby
        if acquired := slot_pool.acquire(image, virt_type):
            slot, saved_uuid = acquired
            return GuestVM(image, virt_type, slot=slot, uuid=saved_uuid)
    return GuestVM(image, virt_type, nic=nic)


def _start(
    vm: GuestVM,
    code: str,
    limits: RunLimits,
    inputs: list[tuple[str, Path]],
    carried: list[tuple[str, Path]],
) -> None:
    if vm.standby:  # restored ahead of the request, paused: it only needs its job, then to run
        if not vm.is_active():
            raise RuntimeError("the standby guest is no longer running")
        vm.write_job(code, limits, inputs, carried)
        vm.resume()
        return
    vm.prepare()
    vm.write_job(code, limits, inputs, carried)
    if vm.slot is not None:
        try:
            vm.restore()
        except libvirt.libvirtError:
            vm.leave_slot()
    if not vm.started:
        vm.cold_boot()
