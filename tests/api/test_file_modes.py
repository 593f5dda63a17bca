"""Company data on the host is the service user's alone: the SQLite database and its companions, the data
directory, staged bundles, everything else the service makes there (blobs, a flow's store, the audit anchor,
keys and secrets), each made private from the start, and each run's directory and disks (its own guest's QEMU
uid's, no one else's). No folder above the data and run directories is ever opened up for QEMU."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend import db, filemodes
from backend.settings import get_settings
from backend.tenancy.context import load_user_context_by_email

pytestmark = pytest.mark.hardening


@pytest.fixture
def data_dir(monkeypatch) -> Iterator[Path]:
    """A data directory straight under /tmp (QEMU passes /tmp; it cannot pass pytest's 0700 tmp_path)."""
    path = Path(tempfile.mkdtemp(prefix="cleanroom-modes-"))
    monkeypatch.setattr(get_settings(), "data_dir", path)
    monkeypatch.setattr(get_settings(), "job_disk_mib", 1)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def assert_private(path: Path, guest_ids: tuple[int, int] | None = None) -> None:
    """Nobody but the owner may read or write. A directory every guest passes through may let others pass
    (0711, never list); one guest's own directory may let that guest's group pass (0710)."""
    mode = stat.S_IMODE(path.lstat().st_mode)
    if path.is_dir():
        assert mode in (0o700, 0o710, 0o711), f"{path} is {oct(mode)}"
        if mode != 0o700:
            assert filemodes.qemu_identity() is not None
        if mode == 0o710:
            assert guest_ids is not None and path.stat().st_gid == guest_ids[1]
    else:
        assert mode == 0o600, f"{path} is {oct(mode)}"


def test_positive_control_the_check_refuses_world_readable_files(tmp_path: Path) -> None:
    loose = tmp_path / "loose.sqlite3"
    loose.write_bytes(b"")
    loose.chmod(0o644)
    with pytest.raises(AssertionError, match="0o644"):
        assert_private(loose)
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(AssertionError, match="0o755"):
        assert_private(folder)


def test_a_new_sqlite_database_and_its_wal_and_shm_are_0600(tmp_path: Path) -> None:
    path = tmp_path / "data" / "cleanroom.sqlite3"
    db.make_engine(f"sqlite:///{path}")
    assert_private(path)
    assert_private(path.parent)
    with sqlite3.connect(path) as conn:  # SQLite gives its companions the database file's own mode
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        for suffix in ("-wal", "-shm"):
            companion = path.with_name(path.name + suffix)
            assert companion.exists()
            assert_private(companion)


def test_a_database_left_world_readable_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    sqlite3.connect(path).close()
    wal = path.with_name(path.name + "-wal")
    wal.write_bytes(b"")
    for loose in (path, wal):
        loose.chmod(0o644)
    db.make_engine(f"sqlite:///{path}")
    assert_private(path)
    assert_private(wal)


def test_the_data_directory_and_its_private_parts(data_dir: Path) -> None:
    from backend.audit import anchor

    assert anchor.DIRECTORY in filemodes.PRIVATE_SUBDIRS  # the anchor's own folder, by its real name
    data = data_dir
    for name in filemodes.PRIVATE_SUBDIRS:
        (data / name).mkdir(parents=True)
        (data / name).chmod(0o755)
    data.chmod(0o755)
    filemodes.prepare_data_dir()
    for path in (data, data / "runs", *(data / name for name in filemodes.PRIVATE_SUBDIRS)):
        assert_private(path)
    assert stat.S_IMODE((data / "bundles").stat().st_mode) == 0o700  # no guest reaches a bundle


@pytest.fixture
def born_as_is(monkeypatch) -> Iterator[None]:
    """Whatever is made keeps the mode it was created with: nothing is masked (umask 0) and every chmod does
    nothing. A file or folder made loose and tightened afterwards (a window in which any local user opens
    it) stays loose here, and is seen."""
    for name in ("chmod", "fchmod"):
        monkeypatch.setattr(os, name, lambda *_, **__: None)
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_what_the_service_makes_in_the_data_directory_is_private_from_the_start(
    data_dir: Path, born_as_is: None, tmp_path: Path, monkeypatch
) -> None:
    """Adversary: a local user opening a file or folder in the moment between its creation and a chmod, or
    one whose missing parents `mkdir(parents=True)` made with the default mode. Here no chmod runs, and
    still every one of them is 0700/0600: each was born so."""
    from backend.audit import anchor
    from backend.drive import blobs
    from backend.fleet import service as fleet
    from backend.flows import progress
    from console.main import storage_secret

    out = tmp_path / "out"  # a step's /work/output as the worker sees it
    out.mkdir()
    (out / "conclusion.json").write_text('{"total": 1}')
    (out / "report.csv").write_text("a\n1\n")
    blobs.put(b"a Drive file")
    assert progress._collect_files({"flow_id": 7, "flow_step": 1}, out, ["report.csv"], 1024)[1] is None
    monkeypatch.setattr(anchor, "database_identity", lambda: "sqlite:/a/database")
    anchor.append(1, "f" * 64)
    key = fleet._key()
    secret = storage_secret(data_dir)
    db.make_engine(f"sqlite:///{data_dir / 'cleanroom.sqlite3'}")
    assert fleet._key() == key and storage_secret(data_dir) == secret  # made once, read afterwards
    made = sorted(data_dir.rglob("*"))
    tops = {path.relative_to(data_dir).parts[0] for path in made}
    assert tops >= {
        "blobs",
        "flows",
        anchor.DIRECTORY,
        "worker-url.key",
        "console_storage_secret",
        "cleanroom.sqlite3",
    }
    assert (data_dir / "flows" / "7" / "step-1" / "report.csv").is_file()
    assert not [p for p in made if p.name.startswith(".")]  # no secret left aside half-written
    for path in made:
        assert_private(path)


def test_positive_control_a_file_tightened_after_it_was_made_is_seen(
    data_dir: Path, born_as_is: None
) -> None:
    """What the console's secret and the flows' store did before: a file written with the default mode and
    chmod-ed afterwards, a folder made with `parents=True` (its parent got the default mode)."""
    secret = data_dir / "console_storage_secret"
    secret.write_text("s")
    secret.chmod(0o600)
    (data_dir / "flows" / "7").mkdir(parents=True, mode=0o700)
    with pytest.raises(AssertionError, match="0o666"):
        assert_private(secret)
    with pytest.raises(AssertionError, match="0o777"):
        assert_private(data_dir / "flows")


def test_missing_folders_above_the_data_directory_are_not_closed(monkeypatch) -> None:
    """The data directory and everything made in it are 0700 from the start; a missing folder above it
    (CLEANROOM_DATA_DIR=/srv/cleanroom/var on a fresh host) gets the default mode, as any folder outside the
    data directory has: the guests may have to pass it on their way to the run directory."""
    base = Path(tempfile.mkdtemp(prefix="cleanroom-above-"))
    try:
        data = base / "srv" / "var"
        monkeypatch.setattr(get_settings(), "data_dir", data)
        filemodes.ensure_dirs(data / "blobs" / "ab")
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE((base / "srv").stat().st_mode) == 0o777 & ~umask
        for path in (data, data / "blobs", data / "blobs" / "ab"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- the kvm probe's directory


def _ancestor_modes(path: Path) -> dict[Path, int]:
    return {folder: folder.stat().st_mode for folder in path.parents if folder.exists()}


def _open_every_ancestor(path: Path) -> None:
    """What the probe's directory was made with before (libvirt_conn.make_private_dir): 0755, and o+x on
    every folder above it up to /."""
    path.mkdir(parents=True)
    path.chmod(0o755)
    for folder in path.parents:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


@pytest.fixture
def behind_a_private_folder(monkeypatch) -> Iterator[Path]:
    """A run directory below a folder other users cannot pass (0700, as a home directory is)."""
    base = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    private = base / "home"
    private.mkdir()
    private.chmod(0o700)
    monkeypatch.setattr(get_settings(), "run_dir", private / "runs")
    yield private
    shutil.rmtree(base, ignore_errors=True)


def test_the_kvm_probes_directory_changes_no_folder_above_the_run_directory(
    behind_a_private_folder: Path,
) -> None:
    """Adversary: a run directory QEMU's users cannot reach. Making the probe's directory never opens the
    way: under a root service with guest uids it is refused, naming the folder in the way; without (QEMU
    runs as this user) it is made. Either way no folder above the run directory changes mode."""
    from backend.sandbox import virt

    private = behind_a_private_folder
    before = _ancestor_modes(private / "runs")
    if filemodes.qemu_identity() is not None:
        with pytest.raises(PermissionError, match=str(private)):
            virt.probe_workdir(None)
    else:
        assert virt.probe_workdir(None).parent == private / "runs"
    assert _ancestor_modes(private / "runs") == before
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


def test_positive_control_the_old_probe_directory_opened_its_ancestors(behind_a_private_folder: Path) -> None:
    private = behind_a_private_folder
    before = _ancestor_modes(private / "runs")
    _open_every_ancestor(private / "runs" / "cleanroom-run-probe-old")
    assert _ancestor_modes(private / "runs") != before
    assert stat.S_IMODE(private.stat().st_mode) == 0o701


def test_the_kvm_probes_directory_is_its_guests_inside_the_run_directory(data_dir: Path) -> None:
    """The reachable case: the probe's directory and files are made as a cold-boot run's are (its guest's
    own), inside the run directory; the folders above the data directory are as they were."""
    from backend.sandbox import virt
    from backend.sandbox.domain import RUN_FILES

    before = _ancestor_modes(data_dir)
    lease = filemodes.lease_cold_identity()
    ids = lease.ids if lease is not None else None
    work = None
    try:
        work = virt.probe_workdir(ids)
        assert work.parent == get_settings().effective_run_dir == data_dir / "runs"
        assert_private(work, ids)
        for name in RUN_FILES:
            assert_private(work / name)
            if ids is not None:
                assert ((work / name).stat().st_uid, (work / name).stat().st_gid) == ids
        assert (work / "job.img").stat().st_size == (work / "out.img").stat().st_size == 1 << 20
        assert _ancestor_modes(data_dir) == before
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        if lease is not None:
            lease.release()


@pytest.mark.sqlite
async def test_a_staged_bundle_is_0700_folders_and_0600_files(demo_db: str, tmp_path: Path) -> None:
    from backend.drive import service as drive
    from backend.staging.service import stage

    alice = await load_user_context_by_email("alice@acme.example")
    file_id = (await drive.upload(alice, "regions.csv", b"region,amount\nEast,1200\n"))["id"]
    bundle = await stage(alice, ["deals"], [file_id], tmp_path / "bundles" / "b1")
    paths = [bundle.directory, *bundle.directory.rglob("*")]
    assert any(p.name == "manifest.json" for p in paths) and any(p.suffix == ".csv" for p in paths)
    assert any(p.is_dir() for p in paths[1:])  # datasets/, files/<stem>/
    for path in [tmp_path / "bundles", *paths]:
        assert_private(path)


def test_a_runs_directory_and_disks_are_for_its_guest_alone(data_dir: Path) -> None:
    from backend.sandbox.vm import GuestVM

    data = data_dir
    vm = GuestVM(None, "qemu", run_id="modes")  # type: ignore[arg-type]  # prepare() needs no image
    try:
        vm.prepare()
        for directory in (data, data / "runs", vm.workdir):
            assert_private(directory, vm.guest_ids)
        for disk in (vm.job_disk, vm.out_disk, vm.console_log):
            assert_private(disk)
            if vm.guest_ids is not None:  # this guest's own: its QEMU opens them without a group or other bit
                assert (disk.stat().st_uid, disk.stat().st_gid) == vm.guest_ids
        assert_private(vm.workdir / "owner")
        assert vm.job_disk.stat().st_size == 1 << 20
    finally:
        vm.kill()
    assert not vm.workdir.exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or filemodes.qemu_identity() is None, reason="needs root and QEMU's user"
)
def test_another_local_user_cannot_open_a_runs_disk_but_its_guest_can(data_dir: Path) -> None:
    """Adversary: an unprivileged local user (the converter's), and QEMU's shared user, open a run's job disk;
    the run's own guest uid can (tests/sandbox/test_slot_uids.py: another guest's uid cannot either)."""
    import subprocess

    from backend.convert.isolated import converter_identity
    from backend.sandbox.vm import GuestVM

    vm = GuestVM(None, "qemu", run_id="reach")  # type: ignore[arg-type]
    probe = "import sys\ntry:\n    open(sys.argv[1], 'rb').read(1)\n    print('opened')\nexcept OSError as e:\n    print(type(e).__name__)"
    qemu_uid, qemu_gid = filemodes.qemu_identity()
    other_uid, other_gid = converter_identity()
    try:
        vm.prepare()

        def open_as(uid: int, gid: int) -> str:
            done = subprocess.run(
                ["/usr/bin/python3", "-c", probe, str(vm.job_disk)],
                user=uid,
                group=gid,
                extra_groups=_groups(uid, gid),
                capture_output=True,
                text=True,
                check=True,
                cwd="/",
            )
            return done.stdout.strip()

        assert open_as(other_uid, other_gid) == "PermissionError"
        assert open_as(qemu_uid, qemu_gid) == "PermissionError"  # the one QEMU user of before: no longer
        assert vm.guest_ids is not None
        assert open_as(*vm.guest_ids) == "opened"  # positive control: its own guest opens its disk
    finally:
        vm.kill()


def _groups(uid: int, gid: int) -> list[int]:
    """A user's groups, or only its own for a guest uid without a passwd entry."""
    import pwd

    try:
        return os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except KeyError:
        return [gid]


@pytest.mark.skipif(os.geteuid() != 0, reason="QEMU is another user only under a root service")
def test_runs_move_out_of_a_data_dir_qemu_cannot_reach_instead_of_opening_its_parents() -> None:
    """A data directory under a private folder (a checkout in /root) keeps its parents as they are and puts
    the per-run disks in the shared run directory; a reachable one keeps them inside (the control)."""
    from backend.settings import SHARED_RUN_DIR, Settings

    base = Path(tempfile.mkdtemp(prefix="cleanroom-rundir-"))  # directly under /tmp, which all may pass
    try:
        base.chmod(0o755)
        home = base / "home"
        data = home / "checkout" / "var"
        data.mkdir(parents=True)
        home.chmod(0o700)
        assert Settings(data_dir=data).effective_run_dir == SHARED_RUN_DIR
        assert stat.S_IMODE(home.stat().st_mode) == 0o700  # left alone
        home.chmod(0o755)
        assert Settings(data_dir=data).effective_run_dir == data / "runs"
        assert Settings(data_dir=data, run_dir=base / "elsewhere").effective_run_dir == base / "elsewhere"
    finally:
        shutil.rmtree(base, ignore_errors=True)
