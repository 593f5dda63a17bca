"""A guest uid holds no leftover between tenants (N-M4). Slot N's QEMU always runs as `guest_uid_base + N`, so
a process that escaped one tenant's QEMU and forked away from it (killing QEMU's pid does not reach it) would
otherwise read and forge the next tenant's disks on that slot.

The adversary is such a process, simulated without a VM: started as the slot's uid with no groups, it forks
twice, takes a session of its own and makes itself non-dumpable (its /proc files then show root), then
sleeps. Releasing the slot (what every end of a VM does: `GuestVM.kill` → `SlotPool.release`) leaves none
alive; so does taking a slot whose last holder died without releasing it. Positive control: the same process
under another uid is untouched. The guest ids here come from a base no real slot uses, so the sweeps cannot
reach a VM another test process runs on this host.

Two fleet workers on one machine (`--host-id alpha`, `--host-id beta`) each keep their own slot 0: their
guests get uids of their own (the default host's stay `guest_uid_base + N`), and every guest uid is held
machine-wide while a guest may run as it, so releasing one host's slot never kills the other host's guest,
even when two host ids hash to the same block of uids or two slot counts make a cold-boot id a slot's."""

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

pytestmark = [
    pytest.mark.hardening,
    pytest.mark.skipif(
        os.geteuid() != 0 or filemodes.qemu_identity() is None,
        reason="per-guest uids need a root service under qemu:///system",
    ),
]

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
def guest_base(monkeypatch) -> Iterator[int]:
    """A guest uid range no slot of this host uses (and no user or group has), for the default host; the
    machine-wide lock files of its uids are removed afterwards."""
    base = 1_500_000_000 + secrets.randbelow(10_000) * filemodes.HOST_STRIDE * (filemodes.HOST_BUCKETS + 1)
    monkeypatch.setattr(get_settings(), "guest_uid_base", base)
    monkeypatch.setattr(get_settings(), "host_id", "")
    yield base
    for uid in range(base, base + filemodes.HOST_STRIDE * (filemodes.HOST_BUCKETS + 1)):
        (filemodes.GUEST_ID_LOCKS / f"{uid}.lock").unlink(missing_ok=True)


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
    lock = filemodes.guest_id_lock(ids[0])  # the uid's machine-wide lock carries the mark
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
    lock = filemodes.guest_id_lock(slot.guest_ids[0])
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
        assert filemodes.guest_id_lock(slot.guest_ids[0]).read_bytes() == b""
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
    top = guest_base + filemodes.HOST_STRIDE * (filemodes.HOST_BUCKETS + 1)  # past every host's block
    for uid in (0, os.geteuid(), guest_base - 1, top):
        with pytest.raises(ValueError):
            filemodes.sweep_guest((uid, uid))
    assert filemodes.sweep_guest(None) == 0  # a session libvirt: QEMU is this user; nothing of its own
    assert filemodes.sweep_guest((guest_base + 3, guest_base + 3)) == 0  # nothing there: nothing done


def on_host(host_id: str, slot: Slot, monkeypatch) -> tuple[Slot, tuple[int, int]]:
    """`slot` as the fleet worker `host_id` sees it (its own states directory), and its guest ids."""
    monkeypatch.setattr(get_settings(), "host_id", host_id)
    ids = slot.guest_ids
    assert ids is not None
    return slot, ids


def hold_as(host_id: str, pool: SlotPool, slot: Slot, monkeypatch) -> bool:
    monkeypatch.setattr(get_settings(), "host_id", host_id)
    return pool.hold(slot)


def release_as(host_id: str, pool: SlotPool, slot: Slot, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "host_id", host_id)
    pool.release(slot)


def test_two_hosts_slot_0_on_one_machine_run_as_different_uids(slot, monkeypatch) -> None:
    """What `cleanroom worker --host-id alpha` and `--host-id beta` on one machine each hold: slot 0 in a
    states directory of its own. Their uids differ from each other's and from every id of the default host,
    whose ids stay `guest_uid_base + N` (its saved states were made as them); each stays the same."""
    base = get_settings().guest_uid_base
    default = range(base, base + get_settings().saved_state_slots + filemodes.COLD_GUEST_IDS)
    _, ids_default = on_host("", slot, monkeypatch)
    assert ids_default == (base, base)
    _, alpha = on_host("alpha", slot, monkeypatch)
    _, beta = on_host("beta", slot, monkeypatch)
    assert alpha != beta and alpha[0] not in default and beta[0] not in default
    assert filemodes.host_block("alpha") != filemodes.host_block("beta")
    for uid in (alpha[0], beta[0]):
        assert uid in filemodes.guest_id_span()
    assert on_host("alpha", slot, monkeypatch)[1] == alpha  # stable: a slot's saved state is made as it
    monkeypatch.setattr(get_settings(), "host_id", "beta")
    cold = filemodes.guest_identity(get_settings().saved_state_slots + filemodes.COLD_GUEST_IDS - 1)
    assert cold is not None and cold[0] - beta[0] < filemodes.HOST_STRIDE  # beta's ids stay in its block
    assert cold[0] not in range(alpha[0], alpha[0] + filemodes.HOST_STRIDE)


def test_releasing_one_hosts_slot_never_kills_the_other_hosts_guest(slot, lingerers, monkeypatch) -> None:
    """Both workers hold slot 0 at once (two pools: two processes' flocks); beta's guest runs as beta's slot
    uid. Alpha ending its run sweeps alpha's uid only: beta's guest lives on. Positive control: alpha's own
    leftover is gone, and beta's is once beta releases."""
    alpha_pool, beta_pool = SlotPool(), SlotPool()
    assert hold_as("alpha", alpha_pool, slot, monkeypatch)
    assert hold_as("beta", beta_pool, slot, monkeypatch)  # its own slot 0, held at the same time
    _, alpha = on_host("alpha", slot, monkeypatch)
    _, beta = on_host("beta", slot, monkeypatch)
    alpha_leftover = linger(alpha, lingerers)
    beta_guest = linger(beta, lingerers)
    release_as("alpha", alpha_pool, slot, monkeypatch)
    assert running(lingerers[0]) == []  # the control: alpha's release does sweep alpha's uid
    assert running(lingerers[1]) == [beta_guest] and filemodes.guest_processes(beta[0]) == [beta_guest]
    assert alpha_leftover not in filemodes.guest_processes(alpha[0])
    release_as("beta", beta_pool, slot, monkeypatch)
    assert running(lingerers[1]) == []


def colliding_host_ids() -> tuple[str, str]:
    """Two valid host ids whose guests would use the same block of uids."""
    seen: dict[int, str] = {}
    for n in range(10_000):
        name = f"h{n}"
        block = filemodes.host_block(name)
        if block in seen:
            return seen[block], name
        seen[block] = name
    raise AssertionError("no two host ids hash alike")


def test_two_host_ids_that_hash_alike_never_hold_one_uid_at_once(slot, lingerers, monkeypatch) -> None:
    """The hostile case of the hash: two workers whose host ids land in one block. The second cannot take
    slot 0 while the first holds it (it takes slot 1, a uid of its own), so the first's release cannot
    reach the second's guest; once released, slot 0 serves the second."""
    first, second = colliding_host_ids()
    _, ids_first = on_host(first, slot, monkeypatch)
    _, ids_second = on_host(second, slot, monkeypatch)
    assert ids_first == ids_second  # same uid: only the machine-wide lock keeps them apart
    one, two = SlotPool(), SlotPool()
    assert hold_as(first, one, slot, monkeypatch)
    assert not hold_as(second, two, slot, monkeypatch)  # its own slot lock is free; the uid is not
    other = Slot(1, slot.image, "qemu")
    assert hold_as(second, two, other, monkeypatch)  # it runs elsewhere meanwhile
    _, ids_other = on_host(second, other, monkeypatch)
    second_guest = linger(ids_other, lingerers)
    release_as(first, one, slot, monkeypatch)
    assert running(lingerers[0]) == [second_guest]
    assert hold_as(second, two, slot, monkeypatch)  # the positive control: free again, it serves
    release_as(second, two, slot, monkeypatch)
    release_as(second, two, other, monkeypatch)
    assert running(lingerers[0]) == []


def test_a_cold_boot_id_of_another_slot_count_is_never_a_held_slots_uid(slot, lingerers, monkeypatch) -> None:
    """Two processes of one host with different slot counts (the bench's workers use one slot): the first
    cold-boot id of one is slot 1's uid of the other. Whoever holds that uid first keeps it; the other takes
    another, and its release sweeps only its own."""
    pool = SlotPool()
    slot1 = Slot(1, slot.image, "qemu")
    assert pool.hold(slot1)
    ids = slot1.guest_ids
    monkeypatch.setattr(get_settings(), "saved_state_slots", 1)
    guest = linger(ids, lingerers)  # slot 1's guest
    lease = filemodes.lease_cold_identity()
    assert lease is not None
    assert filemodes.guest_identity(1) == ids and lease.ids != ids  # base + 1 was taken: the next one
    lease.release()
    assert running(lingerers[0]) == [guest]
    monkeypatch.setattr(get_settings(), "saved_state_slots", 4)
    pool.release(slot1)
    assert running(lingerers[0]) == []


def test_a_named_hosts_uid_someone_has_is_refused(monkeypatch) -> None:
    """`_check_unused` holds in a named host's block too: nobody's number (65534) as alpha's slot 0 is
    refused; the next index, free, is not (the positive control)."""
    monkeypatch.setattr(get_settings(), "host_id", "alpha")
    nobody = 65534
    base = nobody - filemodes.HOST_STRIDE * filemodes.host_block("alpha")
    if base < 1000 or any(_taken(base + i) for i in range(1, 3)):
        pytest.skip("no base puts alpha's slot 0 on 65534 here")
    monkeypatch.setattr(get_settings(), "guest_uid_base", base)
    filemodes._check_unused.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="nobody|nogroup"):
            filemodes.guest_identity(0)
        assert filemodes.guest_identity(1) == (nobody + 1, nobody + 1)
    finally:
        filemodes._check_unused.cache_clear()


def _taken(number: int) -> bool:
    import grp
    import pwd

    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(number)
            return True
        except KeyError:
            pass
    return False
