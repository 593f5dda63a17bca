"""A guest uid holds no leftover between tenants (N-M4). Slot N's QEMU always runs as `guest_uid_base + N`, so
a process that escaped one tenant's QEMU and forked away from it (killing QEMU's pid does not reach it) would
otherwise read and forge the next tenant's disks on that slot.

The adversary is such a process, simulated without a VM: started as the slot's uid with no groups, it forks
twice, takes a session of its own and makes itself non-dumpable (its /proc files then show root), then
sleeps. Releasing the slot (what every end of a VM does: `GuestVM.kill` → `SlotPool.release`) leaves none
alive; so does taking a slot whose last holder died without releasing it. Positive control: the same process
under another uid is untouched. The guest ids here come from a base no real slot uses, so the sweeps cannot
reach a VM another test process runs on this host."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from backend import filemodes
from backend.sandbox.slots import Slot, SlotPool
from backend.settings import get_settings

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or filemodes.qemu_identity() is None,
    reason="per-guest uids need a root service under qemu:///system",
)

# Becomes the guest uid (no groups), like code escaped from its QEMU; the parent exits at once, the grandchild
# lingers in a session of its own. (It starts as root: the interpreter may live where only root can read.)
LINGERER = """
import ctypes, os, sys, time
uid, gid = int(sys.argv[2]), int(sys.argv[3])
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: its /proc files now belong to root
ready = int(sys.argv[4])
os.write(ready, str(os.getpid()).encode())
os.close(ready)
time.sleep(600)
"""


@pytest.fixture
def guest_base(monkeypatch) -> int:
    """A guest uid range no slot of this host uses (and no user or group has)."""
    base = 1_500_000_000 + secrets.randbelow(10_000) * 100
    monkeypatch.setattr(get_settings(), "guest_uid_base", base)
    return base


@pytest.fixture
def slot(guest_base: int, tmp_path: Path) -> Slot:
    image = SimpleNamespace(directory=tmp_path / "image", image_hash=uuid.uuid4().hex)
    return Slot(0, image, "qemu")  # type: ignore[arg-type]


@pytest.fixture
def lingerers() -> Iterator[list[str]]:
    """Tokens of the processes a test leaves behind; whatever is still alive at the end is killed by pid."""
    tokens: list[str] = []
    yield tokens
    for token in tokens:
        for pid in running(token):
            os.kill(pid, signal.SIGKILL)


def linger(ids: tuple[int, int], tokens: list[str]) -> int:
    """Start the lingering process as `ids` (no groups) and return its pid once it runs on its own."""
    token = f"cleanroom-lingerer-{uuid.uuid4().hex}"
    tokens.append(token)
    read, write = os.pipe()
    try:
        subprocess.run(
            [sys.executable, "-c", LINGERER, token, str(ids[0]), str(ids[1]), str(write)],
            cwd="/",
            check=True,
            timeout=60,
            pass_fds=[write],
        )
        os.close(write)
        write = -1
        with os.fdopen(read, "rb") as said:  # EOF once the grandchild has written its pid and closed
            read = -1
            pid = int(said.read())
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)
    assert running(token) == [pid]
    assert (
        Path(f"/proc/{pid}/fd").stat().st_uid == 0
    )  # its /proc files show root; its status says whose it is
    return pid


def running(token: str) -> list[int]:
    """Live (not zombie) processes with `token` in their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() not in (entry / "cmdline").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_a_process_left_on_a_slots_uid_is_gone_once_the_slot_is_released(slot, lingerers) -> None:
    pool = SlotPool()
    assert pool.hold(slot)
    ids = slot.guest_ids
    assert ids is not None and ids[0] >= get_settings().guest_uid_base
    pid = linger(ids, lingerers)
    assert filemodes.guest_processes(ids[0]) == [pid]
    pool.release(slot)
    assert running(lingerers[0]) == [] and filemodes.guest_processes(ids[0]) == []
    lock = slot.directory / f"slot{slot.index}.lock"
    assert lock.read_bytes() == filemodes.SWEPT  # the next holder need not scan again
    assert pool.hold(slot) and lock.read_bytes() == b""  # in use again
    pool.release(slot)


def test_positive_control_a_process_of_another_uid_is_untouched(slot, lingerers) -> None:
    other = Slot(1, slot.image, "qemu")  # the next slot's uid: free, and not the one released
    pool = SlotPool()
    assert pool.hold(slot)
    pid = linger(other.guest_ids, lingerers)
    pool.release(slot)
    assert running(lingerers[0]) == [pid]
    assert filemodes.guest_processes(other.guest_ids[0]) == [pid]


def test_a_slot_whose_last_holder_died_is_swept_before_it_is_handed_out(slot, lingerers) -> None:
    """A holder that died with its guest left no mark: the next one sweeps on taking the slot."""
    pool = SlotPool()
    assert pool.hold(slot)
    pool.release(slot)
    lock = slot.directory / f"slot{slot.index}.lock"
    lock.write_bytes(b"")  # what a holder that died mid-run leaves (marked in use)
    linger(slot.guest_ids, lingerers)
    assert pool.hold(slot)
    assert running(lingerers[0]) == []
    pool.release(slot)


def test_a_slot_whose_uid_keeps_a_survivor_is_not_handed_out(slot, lingerers, monkeypatch) -> None:
    """Were a process to outlive every SIGKILL (here: the kills are switched off), the slot stays out of
    service instead of hosting the next tenant beside it; once it is gone, the slot serves again."""
    pool = SlotPool()
    assert pool.hold(slot)
    pid = linger(slot.guest_ids, lingerers)
    with monkeypatch.context() as without_kills:
        without_kills.setattr(filemodes, "SWEEP_SECONDS", 0.3)
        without_kills.setattr(filemodes, "_kill_all_as", lambda uid, gid: None)
        without_kills.setattr(filemodes, "_kill", lambda pid: None)
        pool.release(slot)  # logged, left unmarked
        assert (slot.directory / f"slot{slot.index}.lock").read_bytes() == b""
        assert not pool.hold(slot)  # sweeps again, fails again: not handed out
        assert running(lingerers[0]) == [pid]
    assert pool.hold(slot)  # the real sweep
    assert running(lingerers[0]) == []
    pool.release(slot)


def test_a_cold_boot_id_is_swept_when_its_lease_ends(guest_base, lingerers) -> None:
    lease = filemodes.lease_cold_identity()
    assert lease is not None and lease.ids[0] >= guest_base + get_settings().saved_state_slots
    linger(lease.ids, lingerers)
    lease.release()
    assert running(lingerers[0]) == []


def test_the_sweep_touches_only_guest_uids(guest_base) -> None:
    for uid in (0, os.geteuid(), guest_base - 1):
        with pytest.raises(ValueError):
            filemodes.sweep_guest((uid, uid))
    assert filemodes.sweep_guest(None) == 0  # a session libvirt: QEMU is this user; nothing of its own
    assert filemodes.sweep_guest((guest_base + 3, guest_base + 3)) == 0  # nothing there: nothing done
