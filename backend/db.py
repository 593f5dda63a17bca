"""Engine set-up: SQLite by default, PostgreSQL when DATABASE_URL says so. Tables are bound explicitly."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import logging
import os
import sqlite3
import weakref
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
from asyncpg.pool import Pool
from piccolo.apps.migrations.commands.forwards import ForwardsMigrationManager, run_forwards
from piccolo.apps.migrations.tables import Migration
from piccolo.engine.base import Engine
from piccolo.engine.postgres import PostgresEngine
from piccolo.engine.sqlite import SQLiteEngine
from piccolo.table import Table, create_db_tables, drop_db_tables

from backend import filemodes
from backend import locks as locks_tables
from backend.actions import tables as actions_tables
from backend.audit import tables as audit_tables
from backend.credits import tables as credits_tables
from backend.drive import tables as drive_tables
from backend.evidence import tables as evidence_tables
from backend.fleet import tables as fleet_tables
from backend.flows import tables as flows_tables
from backend.notify import tables as notify_tables
from backend.records import job_tables as records_job_tables
from backend.records import sync_tables as records_sync_tables
from backend.records import tables as records_tables
from backend.runs import tables as runs_tables
from backend.schedules import tables as schedules_tables
from backend.settings import get_settings
from backend.staging import tables as staging_tables
from backend.tenancy import oauth_tables, sso_tables
from backend.tenancy import tables as tenancy_tables

# Every capability's tables, in dependency order. Capability code never imports this module: it reaches
# the engine through its own table (`Table._meta.db`), so the tables do not depend back on the whole.
TABLE_MODULES = [
    tenancy_tables,
    sso_tables,
    oauth_tables,
    audit_tables,
    records_tables,
    records_sync_tables,
    records_job_tables,
    drive_tables,
    runs_tables,
    actions_tables,
    credits_tables,
    schedules_tables,
    fleet_tables,
    flows_tables,
    evidence_tables,
    locks_tables,
    staging_tables,
    notify_tables,
]

_engine: Engine | None = None
_engine_url: str | None = None
log = logging.getLogger("cleanroom.db")


class LoopPostgresEngine(PostgresEngine):
    """Piccolo's PostgreSQL engine with a pool per event loop. asyncpg connections belong to one loop: code
    running in another (an `asyncio.run` in a thread, a test beside an app whose requests run in a loop of
    their own) must not borrow the pool's connections ("attached to a different loop"). Each loop sees only
    the pool started in it, and opens a connection per query where none was."""

    @property  # type: ignore[override]
    def pool(self) -> Pool | None:
        try:
            return self._pools().get(asyncio.get_running_loop())
        except RuntimeError:  # no running loop
            return None

    @pool.setter
    def pool(self, value: Pool | None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # Piccolo's __init__ sets None outside any loop
            return
        if value is None:
            self._pools().pop(loop, None)
        else:
            self._pools()[loop] = value

    def _pools(self) -> weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool]:
        return self.__dict__.setdefault("_loop_pools", weakref.WeakKeyDictionary())


SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")  # SQLite gives these the database file's own mode


def all_tables() -> list[type[Table]]:
    return [table for module in TABLE_MODULES for table in module.TABLES]


def make_engine(url: str) -> Engine:
    if url.startswith(("postgres://", "postgresql://")):
        return LoopPostgresEngine(config={"dsn": url}, log_queries=False)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        private_sqlite_file(path)
        write_ahead_log(path)
        return SQLiteEngine(path=str(path), timeout=30)
    raise ValueError(f"DATABASE_URL must start with sqlite:/// or postgresql://, got {url!r}")


def private_sqlite_file(path: Path) -> None:
    """The database file exists and is 0600 before SQLite opens it (SQLite creates its -wal, -shm and
    -journal files with the database's mode); files left readable by older versions are tightened."""
    filemodes.ensure_dirs(path.parent)
    filemodes.private_file(path)
    for suffix in SQLITE_COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.is_file() and not companion.is_symlink():
            companion.chmod(filemodes.PRIVATE_FILE)


def write_ahead_log(path: Path) -> None:
    """Switch the file to SQLite's write-ahead log (it stays so; this is a no-op afterwards). Piccolo opens
    a connection per query; with the rollback journal a reader still stepping its SELECT and a writer
    waiting to commit could block each other until the busy timeout (a run's audit entry against a
    request's token touch, seen as "database is locked" after 30 s). With the log, readers never block
    the writer and the writer never blocks readers; writers still take turns."""
    conn = sqlite3.connect(path, timeout=30)
    try:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    finally:
        conn.close()
    if str(mode).lower() != "wal":
        log.warning(
            "SQLite kept journal mode %s for %s; concurrent requests may wait on each other", mode, path
        )
    private_sqlite_file(path)  # the -wal and -shm files it just created: the database's own mode


def configure(url: str | None = None) -> Engine:
    """Point every table at the engine for `url` (default: the settings' database), after giving the data
    directory its modes (backend/filemodes.py)."""
    global _engine, _engine_url
    try:
        filemodes.prepare_data_dir()
    except PermissionError as exc:  # a data directory this user does not own: a read-only CLI still works
        log.warning("could not set the data directory's modes: %s", exc)
    url = url or get_settings().effective_database_url
    if _engine is None or _engine_url != url:  # the same database again keeps its engine and pools
        _engine, _engine_url = make_engine(url), url
    for table in all_tables():
        table._meta.db = _engine
    return _engine


def engine() -> Engine:
    return _engine or configure()


def is_postgres() -> bool:
    return isinstance(engine(), PostgresEngine)


async def create_schema() -> None:
    """Bring the database to the current schema (`migrate`): every process that starts the service or a
    command does, and only the first one to take the migration lock finds anything to do."""
    await migrate()


MIGRATION_LOCK_TABLE = "cleanroom_migration_lock"  # PostgreSQL: locked, never written (below)
MIGRATION_LOCK_SUFFIX = ".migrate-lock"  # SQLite: the flock file beside the database file


async def migrate() -> list[str]:
    """Run the Piccolo migrations in backend/migrations that have not run on this database, under the
    migration lock, and return their ids (none: the database was at head). Two processes starting at once
    (`serve --processes N`, a deploy script's `cleanroom migrate` beside a starting service) never both
    migrate: the second waits for the lock, then finds nothing pending (tests/database/test_migrate.py).

    PostgreSQL: the pool's connections carry the API's lock and statement timeouts (`start_pool`); a
    migration may rewrite a whole table, so pending migrations run on connections of their own with the
    migration's limits (none by default), this module's engine standing in for the pool's meanwhile."""
    global _engine
    current = engine()
    os.environ["PICCOLO_CONF"] = "backend.piccolo_conf"  # Piccolo finds the engine there: this module's
    if not await pending_migrations(current):  # the common start: at head, no lock taken
        return []
    async with migration_lock(current):
        # again, under the lock: another process may have run them meanwhile
        pending = await pending_migrations(current)
        if not pending:
            return []
        migrating = current
        if isinstance(current, PostgresEngine):
            config = {**current.config, "server_settings": get_settings().postgres_timeouts(migration=True)}
            migrating = LoopPostgresEngine(config=config, log_queries=False)
        Migration._meta.db = _engine = migrating
        try:
            with contextlib.redirect_stdout(io.StringIO()) as out:  # piccolo prints progress; keep ours quiet
                response = await run_forwards(app_name="cleanroom", migration_id="all", fake=False)
        finally:
            Migration._meta.db = _engine = current
        if not response.success:
            raise RuntimeError(f"database migration failed: {response.message}\n{out.getvalue()}")
        log.info("migrated the database: %s", ", ".join(pending))
        return pending


@contextlib.asynccontextmanager
async def migration_lock(current: Engine) -> AsyncIterator[None]:
    """Held while migrations run; waited for, never skipped. PostgreSQL: a table locked `ACCESS EXCLUSIVE`
    in a transaction on a connection of its own (not an advisory key, which any role of the cluster could
    hold: backend/locks.py; locking a table needs a privilege on it, which no worker role has). The table is
    made on first use, outside the migrations (it must exist before the first of them runs). SQLite: an
    flock on a file beside the database file."""
    if isinstance(current, PostgresEngine):
        conn = await asyncpg.connect(current.config["dsn"])
        try:
            # another process making it at the same moment: it is there
            with contextlib.suppress(asyncpg.UniqueViolationError, asyncpg.DuplicateTableError):
                await conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATION_LOCK_TABLE} ()")
            async with conn.transaction():
                await conn.execute(f"LOCK TABLE {MIGRATION_LOCK_TABLE} IN ACCESS EXCLUSIVE MODE")
                yield
        finally:
            await conn.close()
        return
    lock_path = Path(current.path + MIGRATION_LOCK_SUFFIX)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, filemodes.PRIVATE_FILE)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


async def pending_migrations(current: Engine | None = None) -> list[str]:
    """The ids of backend/migrations not yet run on this database, oldest first (two queries)."""
    current = current or engine()
    os.environ["PICCOLO_CONF"] = "backend.piccolo_conf"
    Migration._meta.db = current
    manager = ForwardsMigrationManager(app_name="cleanroom")
    folder = manager.get_app_config("cleanroom").resolved_migrations_folder_path
    known = sorted(manager.get_migration_ids(manager.get_migration_modules(folder)))
    if not await Migration.table_exists():
        return known
    ran = set(await Migration.get_migrations_which_ran(app_name="cleanroom"))
    return [migration_id for migration_id in known if migration_id not in ran]


async def create_tables_without_migrations() -> None:
    """Only for comparing the migrations with the table definitions in tests."""
    engine()
    await create_db_tables(*all_tables(), if_not_exists=True)
    for statement in records_tables.EXTRA_INDEXES + staging_tables.EXTRA_INDEXES:
        await records_tables.DatasetRow.raw(statement)
    if is_postgres():
        for statement in records_tables.REFERENCE_CHECKS:
            await records_tables.DatasetRow.raw(statement)


async def drop_schema() -> None:
    current = engine()
    Migration._meta.db = current
    await drop_db_tables(*all_tables())
    await Migration.raw("DROP TABLE IF EXISTS migration")


class PooledConnection(asyncpg.Connection):
    """A pool's connection given back without asyncpg's reset query. Piccolo takes a connection from the pool
    for every query and gives it back after, and asyncpg then sends `pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL` each time: a second round trip per query, a tenth of the API's CPU under the
    control-plane bench's heartbeats (docs/scale.md). The pool's connections hold no session state to undo:
    nothing here takes a session advisory lock, LISTENs, SETs a session variable or keeps a cursor on them
    (the fleet's LISTEN and leader lock have connections of their own, `backend/fleet/queue.py`). An open
    transaction is still rolled back and listeners dropped by asyncpg's own reset (`Connection._reset`);
    `tests/database/test_pool_reset.py` checks both."""

    def get_reset_query(self) -> str:
        return ""


async def start_pool(*, timeouts: bool = True) -> None:
    """`timeouts`: the pool's connections carry the API's `lock_timeout` and `statement_timeout`
    (settings `db_lock_timeout_seconds`, `db_statement_timeout_seconds`): a lock someone holds for ever
    fails a request instead of freezing every writer, and the pool with them (issue 52, D-M1). The command
    line's pool goes without (`cli.support.run_db`: an operator's `audit verify` of a large chain)."""
    eng = engine()
    if isinstance(eng, PostgresEngine):
        extra = {"server_settings": get_settings().postgres_timeouts()} if timeouts else {}
        # connections open as they are first needed (asyncpg's default opens all ten at once: ~100 ms)
        await eng.start_connection_pool(
            min_size=1, max_size=get_settings().db_pool_size, connection_class=PooledConnection, **extra
        )


async def close_pool() -> None:
    eng = engine()
    if isinstance(eng, PostgresEngine):
        await eng.close_connection_pool()
