"""Who may open what on the host: company data under the data directory is the service user's alone.

Everything there is 0700/0600, except the way to the per-run disks: QEMU (under qemu:///system an
unprivileged user, `libvirt-qemu` on Debian) must open them, so the data directory, the run directory and
each per-run directory are 0710 with QEMU's group (it may pass through, never list), and the disks
themselves are 0600 owned by QEMU's user. Nothing outside the data directory is ever chmod-ed: an
ancestor QEMU cannot pass is an error that names it.

Without root (a developer's session libvirt) QEMU runs as this user and plain 0700/0600 is enough.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import stat
from functools import lru_cache
from pathlib import Path

from backend.settings import get_settings

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
GUEST_DIR = 0o710  # the owner; QEMU's group may only pass through
QEMU_CONF = Path("/etc/libvirt/qemu.conf")
QEMU_USERS = ("libvirt-qemu", "qemu")  # Debian's and Fedora's defaults, when qemu.conf names none
PRIVATE_SUBDIRS = ("bundles", "blobs", "audit")  # under the data directory; no guest reaches them


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


def _owned(path: Path) -> bool:
    return path.lstat().st_uid == os.geteuid()


def private_dir(path: Path, *, guest: bool = False) -> Path:
    """Create `path` (and missing parents) if needed and make it 0700, or 0710 with QEMU's group."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    if not _owned(path):
        return path  # someone else's directory: not ours to change
    qemu = qemu_identity() if guest else None
    if qemu is not None:
        os.chown(path, -1, qemu[1])
    path.chmod(GUEST_DIR if qemu is not None else PRIVATE_DIR)
    return path


def private_file(path: Path, *, guest: bool = False) -> Path:
    """Create `path` empty if missing (never truncating) and make it 0600, owned by QEMU when `guest`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
        qemu = qemu_identity() if guest else None
        if qemu is not None:
            os.fchown(fd, *qemu)
    finally:
        os.close(fd)
    return path


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
    """`path` as a directory QEMU can reach. It and its ancestors inside the data directory (and the run
    directory, wherever it is) are made 0710 with QEMU's group; any other directory on the way is left as
    it is, and one QEMU cannot pass raises PermissionError naming it."""
    settings = get_settings()
    ours = {settings.data_dir, settings.effective_run_dir}
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    qemu = qemu_identity()
    for directory in (path, *path.parents):
        if (directory in ours or directory.is_relative_to(settings.data_dir)) and _owned(directory):
            private_dir(directory, guest=True)
        elif qemu is not None and not _passable(directory, qemu):
            raise PermissionError(
                f"QEMU (uid {qemu[0]}) cannot pass through {directory} to reach {path}: give it o+x, or g+x"
                " for QEMU's group, or set CLEANROOM_RUN_DIR to a directory QEMU can reach"
            )
    return path


def _passable(directory: Path, qemu: tuple[int, int]) -> bool:
    info = directory.stat()
    uid, gid = qemu
    groups = {gid, *os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)}
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid in groups:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)
