"""Who may open what on the host: company data under the data directory is the service user's alone.

Everything there is 0700/0600 from the moment it is made (folders and their missing parents with
`ensure_dirs`/`private_dir`, files with `private_file`, `write_private`, `copy_private` and, for secrets,
`new_private_file`; never a default mode tightened afterwards), except the way to the per-run disks.

Under qemu:///system each guest's QEMU runs as its own unprivileged uid and gid (the same number,
`guest_identity`; a static DAC seclabel in the domain XML): slot N's guest as `guest_uid_base + N`, a guest
booted without a slot (the kvm probe's too) as one of the `COLD_GUEST_IDS` ids after the slots', leased for
its lifetime. A fleet worker (settings `host_id`) keeps slots of its own, so a named host's ids lie in a
block of their own (`HOST_STRIDE` ids, chosen by a hash of the host id) above the default host's; and
every guest id, whatever its host, image or slot count, is held with a machine-wide flock per uid
(`GUEST_ID_LOCKS`) while a guest may run as it: two guests that can run at once on one machine never share
a uid, even when two host ids hash alike (the second holder takes another slot or id). So a QEMU escape in
one guest opens no other guest's disks:

- the data directory and the run directory are 0711: every guest uid passes through (they share no
  group), nobody but the owner lists them, and everything inside is 0700/0600;
- each per-run directory is 0710 with its guest's group (it passes, never lists, never creates);
- the disks and the console log are 0600 owned by the guest's uid and gid;
- a guest uid serves one tenant after another, so no process of it outlives its holder: freeing a slot or a
  cold-boot id SIGKILLs every process of that uid and returns once none is alive, and taking one whose last
  holder died first sweeps it (`claim_guest_ids`, `free_guest_ids`).

Nothing outside the data directory is ever chmod-ed, with one exception: libvirt makes each domain's
private directory (master key, monitor) under /var/lib/libvirt/qemu and gives it to the guest's uid, so that
directory needs o+x (upstream libvirt installs it 0751; Debian's package makes it 0750, for its single QEMU
user); the service adds that bit. An ancestor of the run directory the guests cannot pass is an error that
names it. Without root (a developer's session libvirt) QEMU runs as this user and plain 0700/0600 is enough.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import hashlib
import logging
import os
import pwd
import re
import shutil
import signal
import stat
import tempfile
import time
from functools import lru_cache
from pathlib import Path

from backend.settings import get_settings

log = logging.getLogger("cleanroom.filemodes")

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
GUEST_DIR = 0o710  # the owner; the guest's own group may only pass through
PASSAGE_DIR = 0o711  # the owner; every guest uid may only pass through
COLD_GUEST_IDS = 16  # ids for guests booted without a saved-state slot, after the slots' ids
# A named fleet host's guest ids: guest_uid_base + HOST_STRIDE * bucket + index, bucket 1..HOST_BUCKETS from
# a hash of the host id (bucket 0 is the default host's, ""). With the default base the top is 99999: below
# the /etc/subuid ranges (100000 up), whose processes a sweep must never reach.
HOST_STRIDE = 100
HOST_BUCKETS = 299
# One flock per guest uid, machine-wide (every service, worker and host id on this machine; tmpfs: nothing
# that ran as a guest uid outlives a reboot, so neither need the marks). Held while a guest may run as it.
GUEST_ID_LOCKS = Path("/run/cleanroom-guest-ids")
# A guest id's lock file says this once its last holder swept its uid (`free_guest_ids`); empty while held.
SWEPT = b"swept\n"
SWEEP_SECONDS = 5.0  # how long a guest uid's processes may take to die after SIGKILL
LIBVIRT_STATE_DIR = Path("/var/lib/libvirt/qemu")  # libvirt's domain-<id>-<name>/ directories live here
QEMU_CONF = Path("/etc/libvirt/qemu.conf")
QEMU_USERS = ("libvirt-qemu", "qemu")  # Debian's and Fedora's defaults, when qemu.conf names none
# under the data directory; no guest reaches them (audit-anchor: backend/audit/anchor.py DIRECTORY)
PRIVATE_SUBDIRS = ("bundles", "blobs", "audit-anchor", "flows")


@lru_cache(maxsize=1)
def qemu_identity() -> tuple[int, int] | None:
    """(uid, gid) of the user QEMU runs as, or None when QEMU runs as this process's user."""
    if os.geteuid() != 0:
        return None
    name = get_settings().qemu_user or _configured_qemu_user()
    names = [name] if name else list(QEMU_USERS)
    for candidate in names:
        with contextlib.suppress(KeyError, ValueError):
            entry = pwd.getpwuid(int(candidate[1:])) if candidate.startswith("+") else pwd.getpwnam(candidate)
            return None if entry.pw_uid == 0 else (entry.pw_uid, entry.pw_gid)
    return None


def _configured_qemu_user() -> str | None:
    try:
        text = QEMU_CONF.read_text()
    except OSError:
        return None
    match = re.search(r'^\s*user\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return match.group(1) if match else None


def guest_identity(index: int) -> tuple[int, int] | None:
    """(uid, gid) of guest id number `index` (slot N is index N; cold-boot ids follow the slots') on this
    host (settings `host_id`), or None when QEMU runs as this process's user: `guest_uid_base + index` for
    the default host, in the host id's own block for a named one (`host_block`). Refused when some user or
    group already has that number. Stable for a slot: its saved state was made as it (`Slot.config_hash`)."""
    if qemu_identity() is None:
        return None
    settings = get_settings()
    count = settings.saved_state_slots + COLD_GUEST_IDS
    if count > HOST_STRIDE:
        raise ValueError(f"saved_state_slots is at most {HOST_STRIDE - COLD_GUEST_IDS} with per-guest uids")
    if not 0 <= index < count:
        raise ValueError(f"guest id index {index} is outside the configured range")
    number = settings.guest_uid_base + HOST_STRIDE * host_block(settings.host_id) + index
    _check_unused(number)
    return number, number


def host_block(host_id: str) -> int:
    """Which block of `HOST_STRIDE` guest ids a host's guests use: 0 for the default host (""), whose ids
    stay `guest_uid_base + index`; 1..HOST_BUCKETS from a hash of a named host's id, the same in every
    process. Two host ids may hash alike: the machine-wide lock per uid (`take_guest_ids`) still keeps their
    guests apart."""
    if not host_id:
        return 0
    digest = hashlib.sha256(f"cleanroom-guest-ids:{host_id}".encode()).digest()
    return 1 + int.from_bytes(digest[:8], "big") % HOST_BUCKETS


def guest_id_span() -> range:
    """Every uid a guest of any host may run as, with this base."""
    base = get_settings().guest_uid_base
    return range(base, base + HOST_STRIDE * (HOST_BUCKETS + 1))


@lru_cache(maxsize=256)
def _check_unused(number: int) -> None:
    if number < 1000 or number >= 2**31 - 1:
        raise RuntimeError(f"guest uid {number} is outside 1000..2^31: set CLEANROOM_GUEST_UID_BASE")
    for kind, lookup in (("user", pwd.getpwuid), ("group", grp.getgrgid)):
        try:
            entry = lookup(number)
        except KeyError:
            continue
        raise RuntimeError(
            f"guest id {number} is the {kind} {entry[0]!r}: set CLEANROOM_GUEST_UID_BASE to an unused range"
        )


class GuestLeftovers(RuntimeError):
    """Processes of a guest uid outlived every SIGKILL: that uid must not serve another guest yet."""


def guest_processes(uid: int) -> list[int]:
    """Live processes (zombies aside: they hold nothing and run nothing) any of whose user ids (real,
    effective, saved, filesystem) is `uid`. Read from /proc/*/status, so neither a new session, a double fork
    nor a process that made itself non-dumpable (its /proc files then show root) or ran a set-uid program (its
    effective uid is root's, its real uid still the guest's) hides one."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                status = dict(line.split(b":", 1) for line in fh.read().splitlines() if b":" in line)
            uids = {int(part) for part in status[b"Uid"].split()}
            state = status[b"State"].split()[0]
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile
        if uid in uids and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def sweep_guest(ids: tuple[int, int] | None, timeout: float | None = None) -> int:
    """SIGKILL every process of this guest's uid and return once none is alive: how many there were (0 on the
    usual path: QEMU is the guest's only process and is dead by now). Something that escaped QEMU and forked
    away from it is not killed with QEMU's pid, and would otherwise read and forge the next tenant's disks on
    this uid. GuestLeftovers when some survive `timeout` (default SWEEP_SECONDS). None (QEMU runs as this
    process's own user) has nothing of its own to sweep."""
    if ids is None:
        return 0
    uid, gid = ids
    if uid not in guest_id_span() or uid in (0, os.geteuid()):
        raise ValueError(f"uid {uid} is not a guest's")
    found = guest_processes(uid)
    if not found:
        return 0
    timeout = SWEEP_SECONDS if timeout is None else timeout
    _kill_all_as(uid, gid)  # all at once, forks in flight included, before picking them off one by one
    deadline = time.monotonic() + timeout
    while left := guest_processes(uid):
        if time.monotonic() > deadline:
            raise GuestLeftovers(
                f"processes {left[:10]} of guest uid {uid} survived SIGKILL for {timeout:g} s"
            )
        for pid in left:
            _kill(pid)
        time.sleep(0.01)
    return len(found)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _kill_all_as(uid: int, gid: int) -> None:
    """kill(-1, SIGKILL) from a child that has become `uid`: the kernel signals every process of that uid in
    one pass under its task-list lock, so a process forking as fast as it can cannot stay ahead of it (a
    fork in progress is abandoned). The child has no groups and no capabilities: it reaches nobody else."""
    pid = os.fork()
    if pid == 0:  # only system calls from here: this process may have other threads
        code = 1
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
            code = 0
        finally:
            os._exit(code)
    os.waitpid(pid, 0)


def claim_guest_ids(fd: int, ids: tuple[int, int] | None) -> None:
    """On taking a guest id's lock (its open lock file `fd`): unless the last holder left it marked swept,
    sweep it now (that holder died before it could); then mark it in use until `free_guest_ids`."""
    if ids is not None and os.pread(fd, len(SWEPT), 0) != SWEPT:
        sweep_guest(ids)
    os.ftruncate(fd, 0)


def free_guest_ids(fd: int, ids: tuple[int, int] | None) -> None:
    """Before dropping a guest id's lock: sweep its uid (checked, not assumed: `sweep_guest` returns only once
    none is alive), then mark the lock file swept for the next holder, which then need not scan again."""
    sweep_guest(ids)
    os.pwrite(fd, SWEPT, 0)


def guest_id_lock(uid: int) -> Path:
    """The machine-wide lock file of guest uid `uid` (its directory made root's and 0700 if missing)."""
    GUEST_ID_LOCKS.mkdir(mode=PRIVATE_DIR, exist_ok=True)
    info = GUEST_ID_LOCKS.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise RuntimeError(f"{GUEST_ID_LOCKS} must be a directory of this user's, closed to others (0700)")
    return GUEST_ID_LOCKS / f"{uid}.lock"


def take_guest_ids(ids: tuple[int, int]) -> GuestIdLease | None:
    """Guest uid `ids` for one guest, held with its machine-wide flock until the lease is released (swept
    first unless its last holder swept it); None when another guest holds it (any process, any host id) or
    a process of it outlives the sweep (logged: it is not handed out)."""
    fd = os.open(guest_id_lock(ids[0]), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        claim_guest_ids(fd, ids)
    except GuestLeftovers as exc:
        log.error("guest id %s is not handed out: %s", ids[0], exc)
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        return None
    return GuestIdLease(ids, fd)


class GuestIdLease:
    """One guest id (a slot's or a cold-boot one), held with its machine-wide flock (threads and processes
    never share one) until released; swept when taken (unless its last holder swept it) and when released."""

    def __init__(self, ids: tuple[int, int], fd: int) -> None:
        self.ids, self._fd = ids, fd

    def release(self) -> None:
        if self._fd >= 0:
            try:
                free_guest_ids(self._fd, self.ids)
            except GuestLeftovers as exc:  # left unmarked: its next holder sweeps again, or skips it
                log.error("guest id %s stays unmarked: %s", self.ids[0], exc)
            finally:
                os.close(self._fd)  # closing drops the flock
                self._fd = -1


def lease_cold_identity() -> GuestIdLease | None:
    """A free cold-boot guest id, or None when QEMU runs as this process's user; RuntimeError when all of
    them are in use."""
    if qemu_identity() is None:
        return None
    settings = get_settings()
    for offset in range(COLD_GUEST_IDS):
        ids = guest_identity(settings.saved_state_slots + offset)
        assert ids is not None
        if lease := take_guest_ids(ids):
            return lease
    raise RuntimeError(f"all {COLD_GUEST_IDS} guest ids for VMs without a slot are in use")


def _owned(path: Path) -> bool:
    return path.lstat().st_uid == os.geteuid()


def ensure_dirs(path: Path) -> Path:
    """Create `path` and its missing parents, each 0700 from the start (`Path.mkdir(parents=True)` gives the
    parents the default mode); folders that exist already are left as they are. A missing folder above the
    data directory gets the default mode: it is not ours to close (the guests may have to pass it)."""
    above = set(get_settings().data_dir.parents)
    missing = []
    for directory in (path, *path.parents):
        if directory.is_dir():
            break
        missing.append(directory)
    for directory in reversed(missing):  # exist_ok: made meanwhile by another thread or process
        directory.mkdir(mode=0o777 if directory in above else PRIVATE_DIR, exist_ok=True)
    return path


def private_dir(path: Path, *, guest: bool = False, ids: tuple[int, int] | None = None) -> Path:
    """Create `path` (and missing parents, 0700) if needed and make it 0700; with `ids`, one guest's own
    directory (0710 with that guest's group); with `guest`, a directory every guest passes through (0711)."""
    ensure_dirs(path)
    if not _owned(path):
        return path  # someone else's directory: not ours to change
    if ids is not None:
        os.chown(path, -1, ids[1])
        path.chmod(GUEST_DIR)
    else:
        path.chmod(PASSAGE_DIR if guest and qemu_identity() is not None else PRIVATE_DIR)
    return path


def private_file(path: Path, *, ids: tuple[int, int] | None = None) -> Path:
    """Create `path` empty if missing (never truncating) and make it 0600, owned by the guest `ids` if given."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
        if ids is not None:
            os.fchown(fd, *ids)
    finally:
        os.close(fd)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write `path` 0600 from the start (never through a symlink), replacing what it held."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fd, PRIVATE_FILE)  # a file left loose by an older version
        fh.write(data)


def copy_private(source: Path, target: Path) -> None:
    """Copy `source` to `target`, which is 0600 from the start (`shutil.copyfile` makes it 0644)."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as fh, open(source, "rb") as src:
        os.fchmod(fd, PRIVATE_FILE)
        shutil.copyfileobj(src, fh)


def new_private_file(path: Path, data: bytes) -> bool:
    """Make `path` (a secret: a key, a token) holding `data`, 0600 from the start and complete when it
    appears (written aside, then linked in place); False, and `path` untouched, when it exists already
    (another process made it first)."""
    ensure_dirs(path.parent)
    fd, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mkstemp makes it 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(aside, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(aside)
    return True


def prepare_data_dir() -> None:
    """The data directory and its parts with their modes; loosened ones from older versions are tightened."""
    settings = get_settings()
    data_dir = settings.data_dir
    run_dir = settings.effective_run_dir
    inside = run_dir.is_relative_to(data_dir)
    private_dir(data_dir, guest=inside)
    for name in PRIVATE_SUBDIRS:
        sub = data_dir / name
        if sub.is_dir() and not sub.is_symlink():
            private_dir(sub)
    guest_dir(run_dir)


def guest_dir(path: Path) -> Path:
    """`path` as a directory every guest passes through. It and its ancestors inside the data directory (and
    the run directory, wherever it is) are made 0711; any other directory on the way is left as it is, and
    one the guests cannot pass (no o+x: their uids own nothing and are in no group) raises PermissionError
    naming it."""
    settings = get_settings()
    ours = {settings.data_dir, settings.effective_run_dir}
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    guests = qemu_identity() is not None
    if guests:
        libvirt_state_passable()
    for directory in (path, *path.parents):
        if (directory in ours or directory.is_relative_to(settings.data_dir)) and _owned(directory):
            private_dir(directory, guest=True)
        elif guests and not directory.stat().st_mode & stat.S_IXOTH:
            raise PermissionError(
                f"the guests' QEMU (uids from {settings.guest_uid_base}) cannot pass through {directory} to"
                f" reach {path}: give it o+x, or set CLEANROOM_RUN_DIR to a directory they can reach"
            )
    return path


def guest_workdir(path: Path, ids: tuple[int, int] | None = None) -> Path:
    """A new per-run directory `path` in the run directory for a guest that is not a run's (the kvm probe, a
    test's stray domain): made as a run's is (the run directory passable by `guest_dir`, nothing above it
    changed), then 0710 with the group of the guest `ids`, or without `ids` 0711 when QEMU is libvirt's
    one user (0700 when it is this user)."""
    guest_dir(path.parent)
    path.mkdir(mode=PRIVATE_DIR)
    return private_dir(path, guest=True, ids=ids)


def libvirt_state_passable() -> None:
    """Let every guest uid pass libvirt's state directory to its own domain directory (o+x, never r)."""
    with contextlib.suppress(FileNotFoundError):
        mode = LIBVIRT_STATE_DIR.stat().st_mode
        if not mode & stat.S_IXOTH:
            LIBVIRT_STATE_DIR.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
