"""Dataset exports for staging, fast: the records' own query, run for plain tuples, written straight to CSV.

The rows are chosen exactly as `records.service.export_rows` chooses them: `require_dataset` (the dataset
permission), then `visible_where` (THE visibility rule), oldest first, at most `cap`. Piccolo compiles that
query; this module only runs the compiled SQL without turning every row into a dict of Python objects and
back into text. The CSV bytes equal `rows_to_csv(export.columns, export.rows)` of `export_rows` (a test holds
both paths to that, on SQLite and PostgreSQL).

Scanning reads only text columns, and each distinct value once: business data repeats (statuses, notes,
names), and a finding of a value is reported at every row and column that holds it.
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import io
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from piccolo.engine.sqlite import SQLiteEngine

from backend.injection import Finding, scan_cells, scan_table
from backend.records.datasets import Dataset
from backend.records.service import _select_columns
from backend.records.visibility import require_dataset, visible_where
from backend.tenancy.context import UserContext

# Column types whose values can hold no prose; everything else is scanned.
_NOT_TEXT = {"Integer", "BigInt", "SmallInt", "Serial", "ForeignKey", "Numeric", "Decimal", "Real",
             "DoublePrecision", "Boolean", "Date", "Timestamp", "Timestamptz", "Time", "Interval", "UUID"}  # fmt: skip


@dataclass
class DatasetExport:
    dataset: Dataset
    columns: list[str]
    csv: bytes
    rows: int
    visible_total: int
    text_columns: list[tuple[int, list[Any]]]  # (column index, values in row order) of the text columns

    @property
    def truncated(self) -> bool:
        return self.visible_total > self.rows


def _column_types(dataset: Dataset) -> list[str]:
    types = dataset.column_types
    aliases = {"owner_id": "ForeignKey", "team_id": "ForeignKey"}
    return [aliases.get(name) or types[name] for name in dataset.export_columns]


# --- turning stored values into the text rows_to_csv writes --------------------------------------------


def _iso_datetime(value: Any) -> Any:
    return value.isoformat() if value is not None else None


def _sqlite_timestamptz(value: Any) -> Any:
    """Piccolo stores aware datetimes as str(UTC datetime), reads them back with fromisoformat and UTC."""
    if value.__class__ is str and value.endswith("+00:00") and len(value) in (25, 32) and value[10] == " ":
        return value[:10] + "T" + value[11:]
    if value is None:
        return None
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC).isoformat()
    return value


def _sqlite_timestamp(value: Any) -> Any:
    return dt.datetime.fromisoformat(value).isoformat() if isinstance(value, str) else value


def _sqlite_boolean(value: Any) -> Any:
    if value is None:
        return None
    return "True" if str(value) == "1" else "False"


def _sqlite_numeric(value: Any) -> Any:
    # SQLite hands back a REAL or an INTEGER; Piccolo reads its text form into a Decimal. For money
    # (at most 15 significant digits) repr(float) and SQLite's "%.15g" agree, so only text needs a look.
    return str(value) if isinstance(value, str) else value


_SQLITE_FORMAT: dict[str, Callable[[Any], Any]] = {
    "Timestamptz": _sqlite_timestamptz,
    "Timestamp": _sqlite_timestamp,
    "Boolean": _sqlite_boolean,
    "Numeric": _sqlite_numeric,
}
# asyncpg returns date, Decimal, bool and int, whose str() is what rows_to_csv writes; datetimes need 'T'.
_POSTGRES_FORMAT: dict[str, Callable[[Any], Any]] = {"Timestamptz": _iso_datetime, "Timestamp": _iso_datetime}


def _to_csv(columns: list[str], rows: Iterable[Iterable[Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue().encode()


# --- running the compiled query ---------------------------------------------------------------------------


def _sqlite_fetch(engine: SQLiteEngine, count_sql: tuple[str, list[Any]], select_sql: tuple[str, list[Any]]):
    """Count and rows in one read transaction (one snapshot), plain tuples, no type converters."""
    conn = sqlite3.connect(engine.connection_kwargs["database"], timeout=30)
    try:
        conn.execute("BEGIN")
        total = conn.execute(*count_sql).fetchone()[0]
        rows = conn.execute(*select_sql).fetchall()
        conn.execute("COMMIT")
        return total, rows
    finally:
        conn.close()


async def export_dataset(ctx: UserContext, dataset_name: str, cap: int) -> DatasetExport:
    dataset = require_dataset(ctx, dataset_name)
    table = dataset.table
    where = visible_where(ctx, dataset)
    count_query = table.count().where(where)
    select_query = table.select(*_select_columns(dataset)).where(where).order_by(table.id).limit(cap)
    engine = table._meta.db
    types = _column_types(dataset)

    if isinstance(engine, SQLiteEngine) and engine.current_transaction.get() is None:
        kind = engine.engine_type
        total, rows = await asyncio.to_thread(
            _sqlite_fetch,
            engine,
            count_query.querystrings[0].compile_string(engine_type=kind),
            select_query.querystrings[0].compile_string(engine_type=kind),
        )
        formats = _SQLITE_FORMAT
    elif not isinstance(engine, SQLiteEngine):
        total = await count_query
        rows = await engine.run_querystring(select_query.querystrings[0])  # asyncpg Records: tuples
        formats = _POSTGRES_FORMAT
    else:  # inside a SQLite transaction: only its own connection sees its writes
        total = await count_query
        dict_rows = await select_query
        rows = [tuple(r.values()) for r in dict_rows]
        formats = _POSTGRES_FORMAT

    return _assemble(dataset, types, rows, total, formats)


def _assemble(
    dataset: Dataset,
    types: list[str],
    rows: list[Any],
    total: int,
    formats: dict[str, Callable[[Any], Any]],
) -> DatasetExport:
    columns = dataset.export_columns
    if rows:
        by_column: list[Any] = list(zip(*rows, strict=True))
        for j, kind in enumerate(types):
            fmt = formats.get(kind)
            if fmt is not None:
                by_column[j] = list(map(fmt, by_column[j]))
        data = _to_csv(columns, zip(*by_column, strict=True))
    else:
        by_column = [[] for _ in columns]
        data = _to_csv(columns, [])
    text_columns = [(j, list(by_column[j])) for j, kind in enumerate(types) if kind not in _NOT_TEXT]
    return DatasetExport(dataset, columns, data, len(rows), total, text_columns)


# --- scanning -------------------------------------------------------------------------------------------


def scan_export(export: DatasetExport, *, path: str) -> list[Finding]:
    """Findings in the header and every text cell; each distinct value is scanned once."""
    header = export.columns
    findings = scan_table(header, [], path=path)
    distinct: set[str] = set()
    for _, values in export.text_columns:
        distinct.update(values)
    values = [v for v in distinct if isinstance(v, str) and v]
    hits = {values[i]: found for i, found in scan_cells(values).items()}
    if not hits:
        return findings
    located = []
    for j, column in export.text_columns:
        for r, value in enumerate(column, start=1):
            if value in hits:
                located.extend((r, j, hit) for hit in hits[value])
    located.sort(key=lambda x: (x[0], x[1]))
    findings += [
        Finding(path=path, sheet=None, row=r, column=header[j], **hit.__dict__) for r, j, hit in located
    ]
    return findings
