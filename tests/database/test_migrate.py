"""`cleanroom migrate` under the migration lock: two processes migrating one new database at once never both
migrate. The test holds the lock itself, starts both, sees both waiting on it (the lock is really taken: a
removed lock would let them run through, and the wait below would time out), lets go, and exactly one ran the
migrations while the other found nothing to do. `--check` exits 3 while migrations wait and 0 at head."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from backend import db
from backend.settings import REPO_ROOT
from tests.support.databases import POSTGRES_URL, _admin_sql, _with_db

DEADLINE_SECONDS = 60


@pytest.fixture
def new_database(engine: str, tmp_path: Path) -> Iterator[str]:
    """A database no migration has run on."""
    if engine == "sqlite":
        (tmp_path / "new.sqlite3").touch()  # an empty database (`migrate --check` refuses a missing one)
        yield f"sqlite:///{tmp_path / 'new.sqlite3'}"
        return
    name = f"t_migrate_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin_sql(f'CREATE DATABASE "{name}"'))
    yield _with_db(POSTGRES_URL or "", name)
    asyncio.run(_admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _cli(url: str, data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": url, "CLEANROOM_DATA_DIR": str(data_dir)}
    return subprocess.Popen(
        [sys.executable, "-m", "backend", "migrate", *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(what: str, condition) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _flock_waiters(lock_file: Path) -> int:
    inode = lock_file.stat().st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and "FLOCK" in line and f":{inode} " in line)


class _HeldLock:
    """The migration lock, held by the test as a migrating process would hold it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.context = None

    def __enter__(self) -> _HeldLock:
        engine = db.make_engine(self.url)
        self.context = db.migration_lock(engine)
        self.loop.run_until_complete(self.context.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.run_until_complete(self.context.__aexit__(None, None, None))
        self.loop.close()

    def waiters(self) -> int:
        if self.url.startswith("sqlite"):
            return _flock_waiters(Path(self.url.removeprefix("sqlite:///") + db.MIGRATION_LOCK_SUFFIX))

        async def count() -> int:
            conn = await asyncpg.connect(self.url)
            try:
                return await conn.fetchval(
                    "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                    "WHERE c.relname = $1 AND NOT l.granted",
                    db.MIGRATION_LOCK_TABLE,
                )
            finally:
                await conn.close()

        return asyncio.run(count())


def test_two_migrates_at_once_one_migrates_the_other_waits_and_finds_nothing(
    new_database: str, tmp_path: Path, engine: str
) -> None:
    checks = engine == "sqlite"  # `--check`'s exit codes are the command's, not the engine's: asked once
    if checks:
        check = _cli(new_database, tmp_path, "--check")
        out, err = check.communicate(timeout=DEADLINE_SECONDS)
        assert check.returncode == 3 and "migration(s) to run" in out, out + err  # a new database
    with _HeldLock(new_database) as held:
        first, second = _cli(new_database, tmp_path), _cli(new_database, tmp_path)
        try:
            # both wait on the lock the test holds: neither migrates beside another migration
            _until("both migrate processes to wait on the lock", lambda: held.waiters() == 2)
            assert first.poll() is None and second.poll() is None
        except BaseException:
            first.kill()
            second.kill()
            raise
    outputs = [p.communicate(timeout=DEADLINE_SECONDS) for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outputs
    stdout = [out for out, _ in outputs]
    assert sum("ran " in out for out in stdout) == 1, stdout  # exactly one migrated
    assert sum("nothing to migrate" in out for out in stdout) == 1, stdout
    if checks:
        check = _cli(new_database, tmp_path, "--check")
        out, err = check.communicate(timeout=DEADLINE_SECONDS)
        assert check.returncode == 0 and "nothing to migrate" in out, out + err
