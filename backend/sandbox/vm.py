"""`GuestVM`: one guest from restore (or cold boot) to kill, in the shape of Firecracker's test `Microvm`.

with GuestVM(image, virt_type, slot=slot, uuid=saved_uuid) as vm:
    vm.prepare()                        # per-run directory, empty job disk, zeroed output disk
    vm.write_job(code, limits, inputs)  # the agent polls its job disk: before or after the start
    vm.restore()                        # or vm.cold_boot()
    guest = vm.wait(limits)             # the guest's result record (still hostile input)
# leaving the block kills the domain, deletes the per-run directory and frees the slot
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
import uuid as uuid_module
from pathlib import Path

import libvirt
import libvirt_qemu

from backend import filemodes
from backend.sandbox import domain, wire
from backend.sandbox import libvirt_conn as lv
from backend.sandbox.image import ImageInfo
from backend.sandbox.models import RunLimits, VmInfo
from backend.sandbox.output import guest_limits
from backend.sandbox.slots import Slot, slot_pool
from backend.settings import get_settings

RESTORE_READY_TIMEOUT = 60.0
COLLECT_GRACE_SECONDS = 45.0  # the agent enforces the wall limit itself; this covers collecting
POLL_SECONDS = 0.01
# whether the guest still runs is asked of libvirtd less often than the disk is read: two RPCs a poll at 100 Hz
# were most of libvirtd's CPU in the suite, and the answer only matters when a guest powers off without a result
LIVENESS_POLL_SECONDS = 0.2
MISMATCH_BACKOFF_MAX = 2.0
CONSOLE_TAIL_CHARS = 1500


log = logging.getLogger(__name__)


def _block0_magic(path: Path) -> str:
    """The first line of the output disk's block 0 (WARM/READY record's magic), for evidence."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16).decode(errors="replace").strip("\0\n")
    except OSError as exc:
        return f"unreadable: {exc}"


def process_cpu(pid: int) -> dict[str, object]:
    """A process's state letter and CPU seconds (user + system, every thread), or why they are unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError as exc:
        return {"error": str(exc)}
    ticks = os.sysconf("SC_CLK_TCK")
    return {"state": fields[0], "cpu_seconds": (int(fields[11]) + int(fields[12])) / ticks}


class GuestFailure(Exception):
    """The guest gave no usable result; the message says how, ending with its console's last lines."""


class GuestVM:
    def __init__(
        self,
        image: ImageInfo,
        virt_type: str,
        *,
        slot: Slot | None = None,  # held by the caller; the VM frees it when killed
        uuid: str | None = None,
        run_id: str | None = None,
        workdir: Path | None = None,
        nic: bool = False,  # only the isolation self-test's positive control
    ) -> None:
        self.image, self.virt_type, self.slot, self.nic = image, virt_type, slot, nic
        self.run_id = run_id or uuid_module.uuid4().hex[:16]
        self.name = slot.name if slot else f"{domain.host_prefix()}{self.run_id}"
        self.uuid = uuid or str(uuid_module.uuid4())
        self.workdir = workdir or get_settings().effective_run_dir / f"{domain.host_prefix()}{self.run_id}"
        self.job_disk, self.out_disk, self.console_log = (self.workdir / f for f in domain.RUN_FILES)
        self.restored = self.standby = False
        self.paused = False  # a standby guest waits paused (its vCPUs stopped) until resume()
        self.standby_config: str | None = None  # the slot configuration a standby guest was restored for
        # Only the VM suite's positive control sets this (runner._run; no API request reaches it): the guest
        # runs the user code without its syscall filter, to show the probes would see the filter missing.
        self.unfiltered_control = False
        # The uid/gid its QEMU runs as: the slot's own, else a leased cold-boot id (filemodes.guest_identity).
        self.guest_ids: tuple[int, int] | None = None
        self._lease: filemodes.GuestIdLease | None = None
        self.restore_ms: float | None = None
        self.nics: int | None = None
        self.nonce: str | None = None
        # its QEMU process, and when it began (host wall clock; from the kernel where it can be read)
        self.qemu_pid: int | None = None
        self.started_unix = 0.0
        self.launched = self.ready_at = self.finished = 0.0
        self.ready_unix = 0.0  # the host's wall clock when it saw READY: the user code starts right after
        self._conn: libvirt.virConnect | None = None
        self._dom: libvirt.virDomain | None = None

    def __enter__(self) -> GuestVM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    @property
    def conn(self) -> libvirt.virConnect:
        if self._conn is None:
            self._conn = lv.open_connection()
        return self._conn

    @property
    def started(self) -> bool:
        return self._dom is not None

    @property
    def spec(self) -> domain.DomainSpec:
        return domain.DomainSpec.for_run(
            self.name,
            self.uuid,
            self.run_id,
            self.image,
            self.virt_type,
            self.workdir,
            lv.owner_token(),
            guest_ids=self.guest_ids,
        )

    def info(self) -> VmInfo:
        return VmInfo(
            virt_type=self.virt_type,
            nics=self.nics,
            image_hash=self.image.image_hash,
            domain_name=self.name,
            run_id=self.run_id,
            restored=self.restored,
            standby=self.standby,
            restore_ms=self.restore_ms,
            qemu_pid=self.qemu_pid,
            qemu_started_unix=round(self.started_unix, 3) if self.started_unix else None,
            nonce=self.nonce,
        )

    def prepare(self) -> None:
        """The per-run directory (this process as its owner, for leftover recovery) and both empty disks.

        The directory is 0710 with this guest's own group (it passes, never lists); the disks and the console
        log are 0600 and this guest's own uid's, so neither another local user nor another guest's QEMU
        reads a run's data (backend/filemodes.py)."""
        if self.slot is not None:
            self.guest_ids = self.slot.guest_ids
        else:
            self._lease_cold_ids()
        filemodes.guest_dir(self.workdir.parent)
        self.workdir.mkdir(mode=filemodes.PRIVATE_DIR)
        filemodes.private_file(self.workdir / "owner").write_text(lv.owner_token())
        self._own_files()
        with open(self.job_disk, "r+b") as fh:
            fh.truncate(domain.job_disk_bytes())
        wire.create_output_disk(self.out_disk, domain.output_disk_bytes())

    def write_job(
        self,
        code: str,
        limits: RunLimits,
        inputs: list[tuple[str, Path]],
        carried: list[tuple[str, Path]] | None = None,
    ) -> None:
        """Hand the guest its job, with a fresh nonce, RNG seed and clock. Starts the run's clock."""
        self.launched, self.nonce = time.monotonic(), secrets.token_hex(16)
        job = {"run_id": self.run_id, "nonce": self.nonce, "code": code, "seed": secrets.token_hex(64)}
        job.update(time_ns=time.time_ns(), network=self.nic, limits=guest_limits(limits))
        if self.unfiltered_control:
            job["unfiltered_control"] = True
        wire.write_job_disk(
            self.job_disk, domain.job_disk_bytes(), job, inputs, carried=carried, in_place=True
        )

    def restore(self) -> None:
        """Restore the slot's warm saved state with this VM's own disks (name and UUID stay the slot's)."""
        assert self.slot is not None
        began = time.monotonic()
        lv.wait_name_free(self.conn, self.name)
        self.conn.restoreFlags(str(self.slot.state_path), self._xml(), libvirt.VIR_DOMAIN_SAVE_RUNNING)
        self._running(self.conn.lookupByName(self.name))
        self.restored, self.restore_ms = True, round((time.monotonic() - began) * 1000, 1)

    def pause(self) -> None:
        """Stop the vCPUs (a standby guest while it waits: no CPU spent). QEMU's guest clock stands still
        too, so nothing catches up on `resume()`; the job sets the wall clock."""
        assert self._dom is not None
        self._dom.suspend()
        self.paused = True

    def resume(self) -> None:
        """Let a paused guest run again (a no-op for one that runs)."""
        if self.paused:
            assert self._dom is not None
            self._dom.resume()
            self.paused = False

    def leave_slot(self) -> None:
        """After a refused restore: drop the useless state (unless a stray domain merely held the name),
        free the slot and go on as a cold-boot VM under the run's own name."""
        assert self.slot is not None
        if not lv.destroy_quietly(self.conn, self.name):
            self.slot.discard()
        slot_pool.release(self.slot)
        self.slot = None
        self.name, self.uuid = f"{domain.host_prefix()}{self.run_id}", str(uuid_module.uuid4())
        self._lease_cold_ids()  # the slot's uid may serve its next holder now: the files move to our own
        self._own_files()

    def cold_boot(self) -> None:
        self._running(self.conn.createXML(self._xml(), 0))

    def is_active(self) -> bool:
        return lv.domain_is_active(self.conn, self.name)

    def save(self, path: Path) -> None:
        """Save the running guest (which stops it), under a temporary name until complete."""
        assert self._dom is not None
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        self._dom.saveFlags(str(partial), None, libvirt.VIR_DOMAIN_SAVE_RUNNING)
        partial.rename(path)

    def wait(self, limits: RunLimits) -> wire.GuestResult:
        """Poll the output disk until this job's result is complete; GuestFailure when none comes.

        Until the guest reports READY for this job's nonce the deadline is the restore (or boot)
        timeout; from then on the wall limit plus a grace.
        """
        timeout = RESTORE_READY_TIMEOUT if self.restored else get_settings().cold_boot_timeout_seconds
        deadline = self.launched + timeout
        guest, gone, misses, retry_at, alive_at = None, False, 0, 0.0, 0.0
        results = wire.ResultReader(self.out_disk)  # this run's result-hashing budget
        while True:
            now = time.monotonic()
            if not self.ready_at:
                ready = wire.read_block0(self.out_disk, wire.READY_MAGIC)
                if ready is not None and ready.get("nonce") == self.nonce:
                    self.ready_at, deadline = now, now + limits.wall_seconds + COLLECT_GRACE_SECONDS
                    self.ready_unix = time.time()
            if now >= retry_at or gone:
                guest, mismatch = results.poll()
                if guest is not None:
                    break
                if mismatch:  # torn or forged: do not rehash up to the whole payload at every poll
                    misses += 1
                    retry_at = now + min(MISMATCH_BACKOFF_MAX, POLL_SECONDS * 2**misses)
            if gone or now > deadline:
                break
            if now >= alive_at:
                alive_at = now + LIVENESS_POLL_SECONDS
                if not self.is_active():
                    gone = True  # read the disk once more: the guest may have written just before power-off
                    continue
            time.sleep(POLL_SECONDS)
        self.finished = time.monotonic()
        if guest is not None:
            return guest
        console = f"; console: {tail}" if (tail := self.console_tail()) else ""
        if self.ready_at and not gone:
            log.warning("guest %s stopped responding after READY: %s", self.name, self.hang_evidence())
            raise GuestFailure(f"the guest stopped responding after the code started{console}")
        raise GuestFailure(
            f"the guest {'powered off without a result' if gone else 'never became ready'}{console}"
        )

    def hang_evidence(self) -> dict[str, object]:
        """What a guest that went silent looks like from outside, before it is killed: libvirt's state for
        it, its QEMU process (state, CPU seconds used, sampled twice a second apart: a spinning guest uses
        one core, a halted one nothing), the vCPU's registers and local APIC (QEMU's monitor: where the
        guest is and whether its timer is armed), and block 0 of its output disk. For `cleanroom bench
        hangs` and the service's log; nothing here is shown to the person."""
        evidence: dict[str, object] = {"block0": _block0_magic(self.out_disk)}
        if self._dom is not None:
            try:
                state, reason = self._dom.state()
                evidence["libvirt_state"] = [state, reason]
                evidence["vcpus"] = [self._monitor_cpu(index) for index in range(self.spec.vcpus)]
            except (libvirt.libvirtError, ValueError) as exc:
                evidence["libvirt_error"] = str(exc)
        if self.qemu_pid is not None:
            evidence["qemu_cpu_seconds"] = samples = []
            for _ in range(2):
                samples.append(process_cpu(self.qemu_pid))
                time.sleep(1.0)
        return evidence

    def _monitor_cpu(self, index: int) -> dict[str, str]:
        """One vCPU through QEMU's monitor: its registers (HLT=1: halted, waiting for an interrupt) and its
        local APIC (the timer's mode, count and whether it is masked)."""
        assert self._dom is not None
        shown = {}
        for command in ("info registers", "info lapic"):
            request = {
                "execute": "human-monitor-command",
                "arguments": {"command-line": command, "cpu-index": index},
            }
            reply = json.loads(libvirt_qemu.qemuMonitorCommand(self._dom, json.dumps(request), 0))
            text = str(reply.get("return", reply))
            if command == "info registers":  # the general registers, RIP and HLT; not the vector state
                text = text.split("ES =", 1)[0]
            shown[command] = text.replace("\r", "").strip()[:2000]
        return shown

    def console_tail(self, chars: int = CONSOLE_TAIL_CHARS) -> str:
        """The end of the serial console. Only the end is read: the guest decides how large the file is."""
        try:
            with open(self.console_log, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4 * chars))
                tail = fh.read(4 * chars)
        except OSError:
            return ""
        return tail.decode(errors="replace")[-chars:].strip()

    def kill(self) -> None:
        """SIGKILL the guest, delete its per-run directory, free its slot. Safe to call again."""
        try:
            if self._conn is not None:
                lv.kill_quickly(self._conn, self.name)
        finally:
            if self._conn is not None:
                lv.close_quietly(self._conn)
            self._conn = self._dom = None
            shutil.rmtree(self.workdir, ignore_errors=True)
            if self.slot is not None:
                slot_pool.release(self.slot)
                self.slot = None  # a second kill must not free the slot of its next holder
            if self._lease is not None:
                self._lease.release()
                self._lease = None

    def _lease_cold_ids(self) -> None:
        """A cold-boot guest id of its own, held until the kill (None under a session libvirt)."""
        if self._lease is None:
            self._lease = filemodes.lease_cold_identity()
        self.guest_ids = self._lease.ids if self._lease is not None else None

    def _own_files(self) -> None:
        """The per-run directory (0710, the guest's group) and its disks and console (0600, the guest's)."""
        filemodes.private_dir(self.workdir, ids=self.guest_ids)
        for path in (self.job_disk, self.out_disk, self.console_log):
            filemodes.private_file(path, ids=self.guest_ids)

    def _xml(self) -> str:
        return domain.render_domain_xml(self.spec, positive_control_nic=self.nic)

    def _running(self, dom: libvirt.virDomain) -> None:
        self._dom = dom
        self.qemu_pid, started = lv.qemu_process(self.name)
        self.started_unix = started or time.time()
        self.nics = lv.interface_count(dom.XMLDesc(0))
