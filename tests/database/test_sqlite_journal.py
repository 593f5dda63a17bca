"""SQLite runs with the write-ahead log, so a reader still stepping its SELECT never holds a writer up
(with the rollback journal, a run's audit read and a request's token write blocked each other until
the busy timeout: "database is locked" after 30 s)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from backend import db


def _reader_mid_select_then_write(path: Path) -> None:
    """A reader that has stepped into a SELECT and not finished; a second connection then writes."""
    reader = sqlite3.connect(path, timeout=0.2)
    writer = sqlite3.connect(path, timeout=0.2)
    try:
        cursor = reader.execute("SELECT x FROM t")
        assert cursor.fetchone() is not None  # the reader holds its snapshot (a shared lock) now
        writer.execute("INSERT INTO t VALUES (3)")
        writer.commit()
    finally:
        writer.close()
        reader.close()


def _table(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])


def test_the_engine_puts_the_database_in_wal_mode_and_a_reader_does_not_hold_up_a_writer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cleanroom.sqlite3"
    db.make_engine(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    _table(path)
    _reader_mid_select_then_write(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 3


def test_positive_control_with_the_rollback_journal_the_same_writer_is_locked_out(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    _table(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _reader_mid_select_then_write(path)
