"""A database restored from a backup ends before its audit anchor, and that is told apart from tampering.

`cleanroom backup` marks its copy's head as a signed backup point in the anchor (outside the database, signed
with the key outside it). A database ending exactly at such a point, every entry it holds agreeing with the
anchor, is a restore: `verify` says "behind the anchor by N entries", naming the backup (the CLI exits 3), and
the operator's `audit restored` records it, after which the trail verifies and says forever what was lost.
The hostile party can write the database, not the data directory: a deletion that stops anywhere else, or an
entry rewritten under the restored head, is still tampering; a `restored` line written without the key is an
edited anchor. From the audit table's side a restore and a DELETE of the newest entries look the same, so the
tests restore by deleting: what tells them apart is only what the anchor and the key say.

The service's start (`serve`) refuses a database moved away from its anchor, a new database beside another's
anchor, and a database behind its anchor; `--new-anchor` is the operator's word for the first two."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.audit import anchor
from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.settings import REPO_ROOT

pytestmark = pytest.mark.sqlite  # the anchor's logic is the engine's neither; one engine proves it


async def _record(n: int) -> None:
    for i in range(n):
        await audit.record("test.event", actor="system", company_id=None, data={"i": i})


async def _table() -> dict[int, str]:
    return {r["seq"]: r["hash"] for r in await AuditEntry.select(AuditEntry.seq, AuditEntry.hash)}


async def _back_up() -> anchor.BackupPoint:
    """What `cleanroom backup` writes into the anchor once its copy is taken (the copy's head)."""
    seq, entry_hash = await audit.head()
    return anchor.mark_backup(seq, entry_hash, anchor.now_text())


async def _restore_to(seq: int) -> None:
    """The database as the backup holding entries up to #seq left it (see the module's docstring)."""
    await AuditEntry.delete().where(AuditEntry.seq > seq)


async def test_a_restored_backup_is_behind_not_broken_and_once_recorded_verifies_saying_what_was_lost(
    empty_db: str,
) -> None:
    await _record(3)
    point = await _back_up()
    await _record(4)  # written after yesterday's backup
    assert (await audit.verify()).ok
    await _restore_to(point.seq)

    result = await audit.verify()
    assert not result.ok and result.behind is not None  # not verified yet, and not called tampering
    assert result.behind.head == point.seq and result.behind.newest == point.seq + 4
    assert f"behind the anchor by 4 entries (#{point.seq + 1} to #{point.seq + 4})" in result.reason
    assert point.taken in result.reason
    assert await audit.start_problem() is not None  # the service will not start on it meanwhile

    restore = anchor.record_restore(await _table())
    assert (restore.seq, restore.newest, restore.taken) == (point.seq, point.seq + 4, point.taken)
    after = await audit.verify()
    assert after.ok and after.behind is None, after.reason
    assert [r.describe() for r in anchor.restores()] == [restore.describe()]
    assert "were lost" in restore.describe() and f"#{point.seq + 1} to #{point.seq + 4}" in restore.describe()
    assert await audit.start_problem() is None

    await _record(2)  # the trail goes on, taking the lost entries' numbers
    assert (await audit.verify()).ok
    await _restore_to(point.seq + 1)  # and a deletion after the restore is noticed as ever
    deleted = await audit.verify()
    assert not deleted.ok and deleted.behind is None and "deleted" in deleted.reason


async def test_hostile_deleting_the_newest_entries_elsewhere_than_a_backup_point_is_tampering(
    empty_db: str,
) -> None:
    await _record(3)
    point = await _back_up()
    await _record(4)
    await _restore_to(point.seq + 2)  # not where any backup ended
    result = await audit.verify()
    assert not result.ok and result.behind is None
    assert "the newest 2 entries were deleted" in result.reason
    with pytest.raises(ValueError, match="not a restored backup"):
        anchor.record_restore(await _table())
    assert not (await audit.verify()).ok  # refused: nothing was recorded


async def test_hostile_a_restore_with_an_entry_rewritten_under_its_head_is_tampering(empty_db: str) -> None:
    await _record(3)
    point = await _back_up()
    await _record(2)
    await _restore_to(point.seq)
    await AuditEntry.update({AuditEntry.hash: "f" * 64}).where(AuditEntry.seq == point.seq - 1)
    result = await audit.verify()
    assert not result.ok and result.behind is None
    with pytest.raises(ValueError):
        anchor.record_restore(await _table())


async def test_hostile_a_restored_line_written_without_the_key_counts_for_nothing(empty_db: str) -> None:
    await _record(3)
    point = await _back_up()
    await _record(3)
    await _restore_to(point.seq)
    newest = point.seq + 3
    forged = f"restored {point.seq} {point.entry_hash} {point.taken} 2026-12-06T00:00:00Z {newest} AAAA\n"
    with anchor.path().open("a") as fh:
        fh.write(forged)
    assert anchor.restores() == []  # not a restore: its signature does not verify
    result = await audit.verify()
    assert not result.ok and result.behind is not None  # still a restore nobody recorded (the CLI's exit 3)
    assert await audit.start_problem() is not None
    anchor.record_restore(await _table())  # control: the operator's, with the key, is one
    assert (await audit.verify()).ok
    with anchor.path().open("a") as fh:  # a forged line as the anchor's newest: an edited anchor
        fh.write(forged)
    edited = await audit.verify()
    assert not edited.ok and "does not verify with the audit signing key" in edited.reason


async def test_the_service_refuses_a_database_moved_away_from_its_anchor_unless_told(empty_db: str) -> None:
    await _record(2)
    assert await audit.start_problem() is None  # control: the database and its anchor, together
    moved = anchor.path().rename(anchor.path().with_name("elsewhere.log"))  # as a new path or DSN sees it
    problem = await audit.start_problem()
    assert problem is not None and "no anchor is kept" in problem and "--new-anchor" in problem
    assert await audit.start_problem(new_anchor=True) is None  # the operator's explicit word
    assert anchor.path().exists() and (await audit.verify()).ok
    await _record(1)
    assert (await audit.verify()).ok
    moved.unlink()


async def test_the_service_refuses_a_new_database_beside_another_databases_anchor(empty_db: str) -> None:
    assert anchor.path().exists() is False
    others = anchor.live_anchors()
    if not others:  # this process's data directory keeps no other database's anchor yet: give it one
        (anchor.path().parent).mkdir(parents=True, exist_ok=True)
        anchor.path().with_name("another-database.log").write_text("")
    problem = await audit.start_problem()
    assert problem is not None and "another database" in problem
    assert await audit.start_problem(new_anchor=True) is None
    assert await audit.start_problem() is None  # started: an empty anchor of its own now


def test_cli_verify_of_a_missing_database_is_an_error_and_makes_nothing(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")},
        "CLEANROOM_DATA_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "backend", "audit", "verify"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout
    assert "no database at" in done.stderr and "audit chain OK" not in done.stdout
    assert not (tmp_path / "cleanroom.sqlite3").exists()


def test_hostile_serve_on_a_copy_of_the_database_at_a_new_path_refuses_before_starting(
    demo_db: str, tmp_path: Path
) -> None:
    """The copy's entries have no anchor at its new path: `serve` says so and starts nothing (the in-process
    tests above show --new-anchor starting one, and the database with its anchor starting)."""
    import shutil

    copy = tmp_path / "moved.sqlite3"
    shutil.copy(demo_db.removeprefix("sqlite:///"), copy)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_NEW_ANCHOR")},
        "DATABASE_URL": f"sqlite:///{copy}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "backend", "serve", "--no-console"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no anchor is kept for it" in done.stderr and "--new-anchor" in done.stderr
    assert "Cleanroom API" not in done.stdout  # nothing was served
