"""Sync a company-defined dataset from the company's own PostgreSQL database (issue 54, item 4).

A source is a connection string, a table or a SELECT, and optionally an updated-at column: with it, each sync
reads only the rows whose updated-at is past the largest one synced so far (`cursor`); without it, every row.
Rows go through the import's one path (`importing.load_rows` → `defined.upsert_rows`) in ONE transaction of
Cleanroom's database with its audit entry, so a sync that fails part-way leaves the last good data as it was;
the source then says `failed` and why (`last_error`), which the dataset's page shows.

The source database is only read: the session is opened read-only (`default_transaction_read_only`), the read
runs in a READ ONLY transaction through a server-side cursor (rows fetched `FETCH_ROWS` at a time), each
statement under `statement_timeout`, the whole sync under an overall timeout, and it stops with a clear refusal
past `max_rows` rows or `max_bytes` bytes (a source that returns 10 GB is refused after the cap, never held).

The connection string is a secret: stored sealed (Fernet, key = setting `source_secret_key`, else the file
`source_secret_key` in the data directory, 0600), never returned by the API (`describe` says only whether one
is set), never put in an audit entry, and never in an error message or a log line: every error of the source is
reported by its kind and a message with the connection string and each of its parts (user, password, host,
database) blanked (`_redact`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from backend.records import defined, importing
from backend.records.datasets import DefinedDataset
from backend.records.defined import RowDefaults
from backend.records.sync_tables import DatasetSource
from backend.records.tables import DatasetRow
from backend.settings import get_settings

if TYPE_CHECKING:
    from piccolo.columns import Column

log = logging.getLogger("cleanroom.records.sync")

SECRET_FILE = "source_secret_key"
FETCH_ROWS = 5000
FIRST_FETCH_ROWS = 16
FETCH_BYTES = 8 * 1024 * 1024
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}(\.[A-Za-z_][A-Za-z0-9_$]{0,62})?$")


class SyncRefused(Exception):
    """The sync stopped; the message (never holding the connection string) is shown on the dataset's page."""


# --- the sealed connection string ------------------------------------------------------------------------


def _key() -> bytes:
    from cryptography.fernet import Fernet

    configured = get_settings().source_secret_key
    if configured:
        return configured.encode()
    path = Path(get_settings().data_dir) / SECRET_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    return key


def seal(dsn: str) -> str:
    from cryptography.fernet import Fernet

    return Fernet(_key()).encrypt(dsn.encode()).decode()


def unseal(sealed: str) -> str:
    from cryptography.fernet import Fernet, InvalidToken

    try:
        return Fernet(_key()).decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise SyncRefused("the source's connection string cannot be read with this server's key") from exc


def _secret_parts(dsn: str) -> list[str]:
    parts = [dsn]
    try:
        split = urlsplit(dsn)
        parts += [p for p in (split.username, split.password, split.hostname, split.path.lstrip("/")) if p]
        parts += [unquote(p) for p in parts]
    except ValueError:
        pass
    for key in ("password", "user", "host", "dbname"):  # key=value form
        parts += re.findall(rf"{key}\s*=\s*'?([^\s']+)", dsn)
    return sorted({p for p in parts if len(p) >= 3}, key=len, reverse=True)


def _redact(message: str, dsn: str) -> str:
    for part in _secret_parts(dsn):
        message = message.replace(part, "…")
    return message[:500]


def _source_error(exc: BaseException, dsn: str) -> str:
    import asyncpg

    if isinstance(exc, SyncRefused):
        return _redact(str(exc), dsn)
    if isinstance(exc, asyncpg.QueryCanceledError):
        return "the source database cancelled the query: it ran past the statement timeout"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "the sync ran past its overall time limit and was stopped"
    if isinstance(exc, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError):
        return "the source database refused the sign-in (user or password)"
    if isinstance(exc, OSError):
        return f"the source database cannot be reached ({type(exc).__name__})"
    if isinstance(exc, asyncpg.PostgresError):
        return _redact(f"the source database said: {exc.sqlstate} {exc}", dsn)
    return _redact(f"the sync failed ({type(exc).__name__}: {exc})", dsn)


# --- configuring a source --------------------------------------------------------------------------------


def _check_source(query: str, table: str, updated_at_column: str) -> None:
    if bool(query.strip()) == bool(table.strip()):
        raise ValueError("give either a table or a SQL query, not both")
    if table and not IDENT_RE.match(table):
        raise ValueError("the table must be a name (schema.table), not an expression")
    if updated_at_column and not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$", updated_at_column):
        raise ValueError("the updated-at column must be a column name")
    if query and ";" in query.strip().rstrip(";"):
        raise ValueError("the query must be one SELECT statement")


def _check_cron(cron: str, timezone: str) -> None:
    from croniter import croniter

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {timezone!r}") from exc
    if not croniter.is_valid(cron):
        raise ValueError(f"{cron!r} is not a valid cron expression (minute hour day month weekday)")
    now = dt.datetime.now(dt.UTC)
    first = next_fire(cron, timezone, now)
    if next_fire(cron, timezone, first) - first < dt.timedelta(
        minutes=get_settings().min_schedule_interval_minutes
    ):
        raise ValueError(
            f"a sync may run at most once every {get_settings().min_schedule_interval_minutes} minutes"
        )


def next_fire(cron: str, timezone: str, after: dt.datetime) -> dt.datetime:
    from croniter import croniter

    fire: dt.datetime = croniter(cron, after.astimezone(ZoneInfo(timezone))).get_next(dt.datetime)
    return fire.astimezone(dt.UTC)


def _quoted(name: str) -> str:
    return ".".join(f'"{part}"' for part in name.split("."))


def source_sql(source: dict[str, Any]) -> tuple[str, list[Any]]:
    """The statement a sync runs on the source, and its arguments."""
    base = source["query"].strip().rstrip(";") or f"SELECT * FROM {_quoted(source['source_table'])}"
    column = source["updated_at_column"]
    if not column:
        return base, []
    quoted = f'"{column}"'
    if source["cursor"]:
        return (
            f"SELECT * FROM ({base}) AS cleanroom_source WHERE {quoted} > $1::timestamptz ORDER BY {quoted}",
            [dt.datetime.fromisoformat(source["cursor"])],
        )
    return f"SELECT * FROM ({base}) AS cleanroom_source ORDER BY {quoted}", []


def describe(source: dict[str, Any]) -> dict[str, Any]:
    """What the API and the dataset's page show of a source: never the connection string."""
    return {
        "dataset_id": source["dataset"],
        "connection": "set (hidden)" if source["dsn_sealed"] else "not set",
        "query": source["query"],
        "table": source["source_table"],
        "updated_at_column": source["updated_at_column"],
        "cursor": source["cursor"],
        "cron": source["cron"],
        "timezone": source["timezone"],
        "next_sync_at": source["next_sync_at"],
        "status": source["status"],
        "last_error": source["last_error"],
        "last_attempt_at": source["last_attempt_at"],
        "last_synced_at": source["last_synced_at"],
        "last_summary": json.loads(source["last_summary"]) if source["last_summary"] else None,
    }


async def set_source(
    dataset: DefinedDataset,
    *,
    owner_id: int,
    dsn: str | None,
    query: str = "",
    table: str = "",
    updated_at_column: str = "",
    cron: str = "",
    timezone: str = "UTC",
) -> dict[str, Any]:
    """Create or replace the dataset's source (the caller checked the person and the permission). `dsn` None
    keeps the stored connection string."""
    _check_source(query, table, updated_at_column)
    if cron:
        _check_cron(cron, timezone)
    now = dt.datetime.now(dt.UTC)
    existing = await DatasetSource.select().where(DatasetSource.dataset == dataset.id).first()
    if dsn is None and existing is None:
        raise ValueError("a new source needs its connection string")
    fields: dict[Column, Any] = {
        DatasetSource.query: query,
        DatasetSource.source_table: table,
        DatasetSource.updated_at_column: updated_at_column,
        DatasetSource.cron: cron,
        DatasetSource.timezone: timezone,
        DatasetSource.next_sync_at: next_fire(cron, timezone, now) if cron else None,
    }
    if dsn is not None:
        if not dsn.startswith(("postgres://", "postgresql://")):
            raise ValueError("the connection string must be a postgresql:// URL")
        fields[DatasetSource.dsn_sealed] = seal(dsn)
    if existing is None or dsn is not None or (existing and existing["query"] != query):
        fields[DatasetSource.cursor] = ""  # a new source (or query) starts from a full read
    if existing is None:
        await DatasetSource.insert(
            DatasetSource(
                company=dataset.company_id,
                dataset=dataset.id,
                owner=owner_id,
                **{column._meta.name: value for column, value in fields.items()},
            )
        )
    else:
        await DatasetSource.update(cast("dict[Column | str, Any]", fields)).where(
            DatasetSource.id == existing["id"]
        )
    return await get_source(dataset)


async def get_source(dataset: DefinedDataset) -> dict[str, Any]:
    row = await DatasetSource.select().where(DatasetSource.dataset == dataset.id).first()
    if row is None:
        raise LookupError(f"dataset {dataset.name} has no sync source")
    return describe(row)


# --- syncing ----------------------------------------------------------------------------------------------


class _Capped:
    """Rows of one fetched chunk as (row number, cells), counting rows and bytes against the caps."""

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.rows = 0
        self.bytes = 0
        self.largest: Any = None

    def take(
        self, records: list[Any], header: list[str], stamp_at: int | None
    ) -> Iterator[tuple[int, list[Any]]]:
        for record in records:
            self.rows += 1
            values = list(record.values())
            self.bytes += sum(len(v) if isinstance(v, str | bytes) else 8 for v in values)
            if self.rows > self.max_rows:
                raise SyncRefused(
                    f"the source returned more than {self.max_rows:,} rows, the sync limit; nothing was changed"
                )
            if self.bytes > self.max_bytes:
                raise SyncRefused(
                    f"the source returned more than {self.max_bytes / 2**20:,.0f} MiB, the sync limit; "
                    "nothing was changed"
                )
            stamp = None if stamp_at is None else values[stamp_at]
            if stamp is not None and (self.largest is None or stamp > self.largest):
                self.largest = stamp
            yield self.rows, values


async def _read_into(
    dataset: DefinedDataset,
    source: dict[str, Any],
    dsn: str,
    report: importing.ImportReport,
    fresh: bool = False,
) -> Any:
    """Read the source through a server-side cursor, upserting chunk by chunk (the caller's transaction)."""
    import asyncpg

    settings = get_settings()
    statement_ms = round(settings.sync_statement_timeout_seconds * 1000)
    connection = await asyncpg.connect(
        dsn,
        timeout=settings.sync_connect_timeout_seconds,
        statement_cache_size=0,
        server_settings={
            "default_transaction_read_only": "on",
            "statement_timeout": str(statement_ms),
            "idle_in_transaction_session_timeout": str(statement_ms * 2),
            "application_name": "cleanroom-sync",
        },
    )
    try:
        sql, args = source_sql(source)
        capped = _Capped(settings.sync_max_rows, settings.sync_max_bytes)
        async with connection.transaction(readonly=True, isolation="repeatable_read"):
            cursor = await connection.cursor(sql, *args)
            loader: importing.Loader | None = None
            with importing.fewer_collections():  # as the import's (importing.IMPORT_GC_THRESHOLD)
                try:
                    fetch = FIRST_FETCH_ROWS
                    while True:
                        records = await cursor.fetch(fetch)
                        if not records:
                            break
                        if loader is None:
                            header = list(records[0].keys())
                            if source["updated_at_column"] and source["updated_at_column"] not in header:
                                raise SyncRefused(
                                    f"the source has no column {source['updated_at_column']!r} (its updated-at column)"
                                )
                            stamp_at = (
                                header.index(source["updated_at_column"])
                                if source["updated_at_column"]
                                else None
                            )
                            loader = await importing.Loader.start(
                                dataset,
                                header,
                                apply=True,
                                defaults=_defaults(source),
                                from_text=False,
                                report=report,
                                overlap=True,
                                fresh=fresh,
                            )
                        await loader.feed(capped.take(list(records), header, stamp_at))
                        # as many rows as fit FETCH_BYTES at the size seen so far: a source of 1 MB rows is read a few
                        # at a time, never 5,000 MB in one answer
                        average = max(1, capped.bytes // max(1, capped.rows))
                        fetch = max(1, min(FETCH_ROWS, FETCH_BYTES // average))
                except BaseException:
                    if loader is not None:
                        await loader.abandon()
                    raise
            if loader is not None:
                await loader.finish()  # the last chunk's write, in the caller's transaction
        return capped.largest
    finally:
        await connection.close(timeout=5)


def _defaults(source: dict[str, Any]) -> RowDefaults:
    return RowDefaults(owner_id=source["owner"], team_id=None, visibility="company")


async def sync_dataset(dataset: DefinedDataset, *, actor: str) -> dict[str, Any]:
    """One sync of `dataset` from its source, now. On success the rows, the new cursor and the audit entry
    commit together; on failure nothing of the dataset changes and the source says why."""
    from backend.audit import service as audit

    source = await DatasetSource.select().where(DatasetSource.dataset == dataset.id).first()
    if source is None:
        raise LookupError(f"dataset {dataset.name} has no sync source")
    started = dt.datetime.now(dt.UTC)
    dsn = ""
    report = importing.ImportReport(dataset=dataset.name, applied=True)
    try:
        dsn = unseal(source["dsn_sealed"])
        async with asyncio.timeout(get_settings().sync_timeout_seconds):
            async with DatasetRow._meta.db.transaction():
                # a first sync into an empty dataset: held so, its rows COPYed in (as a first import's)
                fresh = await defined.claim_empty(dataset)
                largest = await _read_into(dataset, source, dsn, report, fresh)
                cursor = source["cursor"]
                if largest is not None:
                    cursor = largest.isoformat() if hasattr(largest, "isoformat") else str(largest)
                await DatasetSource.update(
                    {
                        DatasetSource.cursor: cursor,
                        DatasetSource.status: "ok",
                        DatasetSource.last_error: "",
                        DatasetSource.last_attempt_at: started,
                        DatasetSource.last_synced_at: started,
                        DatasetSource.last_summary: json.dumps(report.as_dict()),
                    }
                ).where(DatasetSource.id == source["id"])
                await audit.record(
                    "dataset.synced",
                    actor=actor,
                    company_id=dataset.company_id,
                    subject_type="dataset",
                    subject_id=dataset.id,
                    data={
                        "incremental": bool(source["updated_at_column"] and source["cursor"]),
                        **report.summary(),
                    },
                )
    except Exception as exc:  # whatever went wrong: the last good data stays, the page says why
        reason = _source_error(exc, dsn) if dsn else _redact(str(exc), dsn or "")
        log.warning("sync of dataset %s failed: %s", dataset.id, reason)
        await DatasetSource.update(
            {
                DatasetSource.status: "failed",
                DatasetSource.last_error: reason,
                DatasetSource.last_attempt_at: started,
            }
        ).where(DatasetSource.id == source["id"])
        await audit.record(
            "dataset.sync_failed",
            actor=actor,
            company_id=dataset.company_id,
            subject_type="dataset",
            subject_id=dataset.id,
            data={"reason": reason},
        )
        raise SyncRefused(reason) from None
    # committed: the planner told of a large load before the next sync looks rows up by key
    await defined.refresh_statistics(dataset, report.added)
    return {"status": "ok", **report.as_dict()}


async def sync_due(now: dt.datetime | None = None) -> list[int]:
    """Sync every source whose schedule fell due (the dispatching loop calls this beside `schedules.fire_due`);
    a failing one is recorded on its source and the others go on. Returns the dataset ids synced."""
    from backend.records.tables import DatasetDefinition

    now = now or dt.datetime.now(dt.UTC)
    due = await DatasetSource.select().where(
        (DatasetSource.cron != "")
        & (DatasetSource.next_sync_at.is_not_null())
        & (DatasetSource.next_sync_at <= now)
    )
    done = []
    for source in due:
        claimed = (
            await DatasetSource.update(
                {DatasetSource.next_sync_at: next_fire(source["cron"], source["timezone"], now)}
            )
            .where(
                (DatasetSource.id == source["id"]) & (DatasetSource.next_sync_at == source["next_sync_at"])
            )
            .returning(DatasetSource.id)
        )
        if not claimed:
            continue  # another dispatcher took it
        row = await DatasetDefinition.select().where(DatasetDefinition.id == source["dataset"]).first()
        if row is None:
            continue
        with contextlib.suppress(SyncRefused):
            await sync_dataset(DefinedDataset.from_row(row), actor="schedule")
        done.append(source["dataset"])
    return done


_due_task: asyncio.Task[list[int]] | None = None


def start_due_syncs() -> None:
    """From the dispatching loops (execution/queue.py, fleet/queue.py): `sync_due` in a task of its own, one at
    a time per process, so a long sync never holds up the runs' dispatch. The claim in `sync_due` keeps two
    processes from syncing the same source for the same firing."""
    global _due_task
    if _due_task is not None and not _due_task.done():
        return
    _due_task = asyncio.get_running_loop().create_task(sync_due())
    _due_task.add_done_callback(_done)


def _done(task: asyncio.Task[list[int]]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("scheduled syncs failed: %s", type(task.exception()).__name__)
