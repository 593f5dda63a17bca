"""Each guest's QEMU runs under its own uid/gid: a QEMU escape in one slot's guest cannot open another slot's
disks. Two guests are restored into two slots at once; each QEMU process runs as its slot's uid, and a
process holding slot A's ids gets EACCES opening slot B's job disk while slot B's ids open it (the positive
control). Guests without a slot lease ids of their own."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend import filemodes
from backend.sandbox.image import current_image
from backend.sandbox.models import RunLimits
from backend.sandbox.output import interpret
from backend.sandbox.slots import slot_pool
from backend.sandbox.virt import resolve_virt_type
from backend.sandbox.vm import GuestVM

pytestmark = [
    pytest.mark.vm,
    pytest.mark.skipif(
        os.geteuid() != 0 or filemodes.qemu_identity() is None,
        reason="per-guest uids need a root service under qemu:///system",
    ),
]

# Drops to (uid, gid) with no supplementary groups, like a QEMU escaped into that guest, then opens a file.
PROBE = """
import os, sys
uid, gid, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
try:
    os.close(os.open(path, os.O_RDONLY))
    print("opened")
except OSError as exc:
    print(exc.errno)
"""


def open_as(ids: tuple[int, int], path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ids[0]), str(ids[1]), str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return done.stdout.strip()


def qemu_uid(vm: GuestVM) -> int:
    pid = Path(f"/run/libvirt/qemu/{vm.name}.pid").read_text().strip()
    done = subprocess.run(["ps", "-o", "uid=", "-p", pid], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def test_two_slots_guests_run_as_their_own_uids_and_cannot_open_each_others_disks(tmp_path: Path) -> None:
    image = current_image()
    assert image is not None
    virt_type = resolve_virt_type(image)
    vms: list[GuestVM] = []
    try:
        for _ in range(2):
            acquired = slot_pool.acquire(image, virt_type)
            assert acquired is not None, "no free slot with a saved state"
            slot, saved_uuid = acquired
            vm = GuestVM(image, virt_type, slot=slot, uuid=saved_uuid)
            vms.append(vm)
            vm.prepare()
            vm.restore()  # libvirt reads the save file itself; the restore XML carries the slot's seclabel
        a, b = vms
        assert a.slot is not None and b.slot is not None and a.slot.index != b.slot.index
        assert a.guest_ids == a.slot.guest_ids and b.guest_ids == b.slot.guest_ids
        assert a.guest_ids != b.guest_ids and filemodes.qemu_identity() not in (a.guest_ids, b.guest_ids)

        uids = {vm.name: qemu_uid(vm) for vm in vms}
        print("QEMU uids (ps -o uid):", uids)
        assert uids == {a.name: a.guest_ids[0], b.name: b.guest_ids[0]}

        for vm in vms:
            assert (vm.job_disk.stat().st_uid, vm.job_disk.stat().st_gid) == vm.guest_ids
            assert (vm.workdir.stat().st_mode & 0o777, vm.workdir.stat().st_gid) == (0o710, vm.guest_ids[1])
        print(
            "console.log:",
            {vm.name: (vm.console_log.stat().st_uid, oct(vm.console_log.stat().st_mode)) for vm in vms},
        )
        for disk in (b.job_disk, b.out_disk):
            assert open_as(a.guest_ids, disk) == str(errno.EACCES), disk
            assert open_as(b.guest_ids, disk) == "opened", disk  # positive control: B's own uid opens it
        assert open_as(b.guest_ids, a.job_disk) == str(errno.EACCES)
        assert open_as(a.guest_ids, a.job_disk) == "opened"

        # Both restored guests still work under their uids: each runs a job and writes its output disk.
        limits = RunLimits(wall_seconds=60)
        for vm in vms:
            vm.write_job(f"print('hello from', {vm.slot.index})", limits, [])
        for vm in vms:
            result = interpret(vm.wait(limits), vm.nonce, vm.info(), tmp_path / vm.name, False)
            assert (result.status, result.stdout) == ("succeeded", f"hello from {vm.slot.index}\n"), result
            # virtlogd (root) writes the serial console: it stays 0600, root's or the guest's own
            info = vm.console_log.stat()
            assert info.st_mode & 0o777 == 0o600 and info.st_uid in (0, vm.guest_ids[0])
    finally:
        for vm in vms:
            vm.kill()


def test_guests_without_a_slot_lease_ids_of_their_own() -> None:
    image = current_image()
    assert image is not None
    slot_ids = {
        filemodes.guest_identity(index) for index in range(filemodes.get_settings().saved_state_slots)
    }
    first, second = (GuestVM(image, "qemu", run_id=f"uids{n}") for n in range(2))
    try:
        first.prepare()
        second.prepare()
        assert first.guest_ids and second.guest_ids and first.guest_ids != second.guest_ids
        assert not {first.guest_ids, second.guest_ids} & slot_ids
        assert first.job_disk.stat().st_uid == first.guest_ids[0]
        assert open_as(second.guest_ids, first.job_disk) == str(errno.EACCES)
        assert open_as(first.guest_ids, first.job_disk) == "opened"
        leased = first.guest_ids
        first.kill()
        third = GuestVM(image, "qemu", run_id="uids2")
        try:
            third.prepare()
            assert third.guest_ids == leased  # freed on kill, leased again
        finally:
            third.kill()
    finally:
        first.kill()
        second.kill()


# Becomes the slot's uid like code escaped from its QEMU, forks away from it (a session of its own) and lingers.
LINGERER = """
import os, sys, time
uid, gid, ready = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.write(ready, str(os.getpid()).encode())
os.close(ready)
time.sleep(600)
"""


def linger(ids: tuple[int, int]) -> int:
    read, write = os.pipe()
    subprocess.run(
        [sys.executable, "-c", LINGERER, str(ids[0]), str(ids[1]), str(write)],
        check=True,
        cwd="/",
        pass_fds=[write],
        timeout=60,
    )
    os.close(write)
    with os.fdopen(read, "rb") as said:
        return int(said.read())


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_a_process_a_guests_qemu_left_on_the_slots_uid_is_gone_before_the_next_run() -> None:
    """A restored guest's QEMU runs as the slot's uid; a process beside it on that uid (what an escape would
    fork) is gone once the VM is killed, and the slot's next holder finds none. Positive control: a process
    of another uid (the converter user's) lives on."""
    from backend.convert.isolated import converter_identity

    image = current_image()
    assert image is not None
    virt_type = resolve_virt_type(image)
    acquired = slot_pool.acquire(image, virt_type)
    assert acquired is not None, "no free slot with a saved state"
    slot, saved_uuid = acquired
    vm = GuestVM(image, virt_type, slot=slot, uuid=saved_uuid)
    leftover = bystander = None
    try:
        vm.prepare()
        vm.restore()
        assert qemu_uid(vm) == slot.guest_ids[0]
        leftover = linger(slot.guest_ids)
        bystander = linger(converter_identity())
        assert alive(leftover) and filemodes.guest_processes(slot.guest_ids[0]) != []
    finally:
        vm.kill()
    try:
        assert not alive(leftover)
        assert filemodes.guest_processes(slot.guest_ids[0]) == []
        assert alive(bystander)
        assert slot_pool.hold(slot)  # the next holder: marked swept, nothing of the last tenant left
        assert filemodes.guest_processes(slot.guest_ids[0]) == []
        slot_pool.release(slot)
    finally:
        for pid in (leftover, bystander):
            if pid is not None and alive(pid):
                os.kill(pid, 9)


def test_a_running_guests_uid_is_never_leased_beside_it_nor_swept_by_another_lease(
    monkeypatch, tmp_path
) -> None:
    """Every guest uid is held machine-wide while its guest runs. A restored guest of the default host keeps
    `guest_uid_base + N` (the uids its cached saved state was made as); a process whose slot count makes
    that uid its first cold-boot id (the bench's one-slot workers) is handed another, and releasing that
    lease leaves the running QEMU alive and working. Positive control: once the guest is gone, its uid is
    leased."""
    image = current_image()
    assert image is not None
    virt_type = resolve_virt_type(image)
    acquired = slot_pool.acquire(image, virt_type)
    assert acquired is not None, "no free slot with a saved state"
    slot, saved_uuid = acquired
    settings = filemodes.get_settings()
    vm = GuestVM(image, virt_type, slot=slot, uuid=saved_uuid)
    try:
        vm.prepare()
        vm.restore()
        uid = qemu_uid(vm)
        if settings.host_id == "":
            assert uid == settings.guest_uid_base + slot.index
        with monkeypatch.context() as fewer:
            fewer.setattr(settings, "saved_state_slots", slot.index)  # its first cold-boot id is this uid
            assert filemodes.guest_identity(slot.index) == slot.guest_ids
            lease = filemodes.lease_cold_identity()
            assert lease is not None and lease.ids != slot.guest_ids
            lease.release()
        assert qemu_uid(vm) == uid and vm.qemu_pid is not None and alive(vm.qemu_pid)
        limits = RunLimits(wall_seconds=60)
        vm.write_job("print('still here')", limits, [])
        result = interpret(vm.wait(limits), vm.nonce, vm.info(), tmp_path / vm.name, False)
        assert (result.status, result.stdout) == ("succeeded", "still here\n"), result
    finally:
        vm.kill()
    with monkeypatch.context() as fewer:
        fewer.setattr(settings, "saved_state_slots", slot.index)
        lease = None
        try:
            lease = filemodes.lease_cold_identity()
            assert lease is not None and lease.ids == slot.guest_ids  # free again: the positive control
        finally:
            if lease is not None:
                lease.release()
