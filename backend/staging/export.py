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
import operator
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from piccolo.engine.sqlite import SQLiteEngine

from backend.injection import Finding, scan_cells, scan_table
from backend.records.datasets import Dataset
from backend.records.service import select_columns
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
    text_columns: list[tuple[int, Sequence[Any]]]  # (column index, values in row order) of the text columns

    @property
    def truncated(self) -> bool:
        return self.visible_total > self.rows


def _column_types(dataset: Dataset) -> list[str]:
    types = dataset.column_types
    aliases = {"owner_id": "ForeignKey", "team_id": "ForeignKey"}
    return [aliases.get(name) or types[name] for name in dataset.export_columns]


# --- turning stored values into the text rows_to_csv writes --------------------------------------------
# Column at a time: each formatter takes a column's values and returns the column as rows_to_csv renders it
# (None stays None and becomes an empty field).


_AT_10 = operator.itemgetter(10)
_LAST_6 = operator.itemgetter(slice(-6, None))


def _sqlite_timestamptz(value: Any) -> Any:
    """Piccolo stores aware datetimes as str(UTC datetime) and reads them back with fromisoformat + UTC."""
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC).isoformat()
    return value


def _sqlite_timestamptz_column(values: Iterable[Any]) -> list[Any]:
    """The canonical stored form 'YYYY-MM-DD HH:MM:SS[.ffffff]+00:00' only needs its space turned into 'T';
    checked for the whole column with C-level passes, anything else goes value by value."""
    column = list(values)
    present = [v for v in column if v is not None] if None in column else column
    n = len(present)
    try:
        joined = "\x1e".join(present)
    except TypeError:  # values that are not text
        return list(map(_sqlite_timestamptz, column))
    if not (
        n
        and set(map(len, present)) <= {25, 32}
        and set(map(_AT_10, present)) == {" "}
        and set(map(_LAST_6, present)) == {"+00:00"}
        and joined.count(" ") == n
        and joined.count("\x1e") == n - 1
    ):
        return list(map(_sqlite_timestamptz, column))
    converted = joined.replace(" ", "T").split("\x1e")
    if present is column:
        return converted
    it = iter(converted)
    return [None if v is None else next(it) for v in column]


def _sqlite_timestamp_column(values: Iterable[Any]) -> list[Any]:
    return [dt.datetime.fromisoformat(v).isoformat() if isinstance(v, str) else v for v in values]


def _sqlite_boolean_column(values: Iterable[Any]) -> list[Any]:
    return [None if v is None else "True" if str(v) == "1" else "False" for v in values]


def _iso_datetime_column(values: Iterable[Any]) -> list[Any]:
    return [None if v is None else v.isoformat() for v in values]


# SQLite hands Numeric back as REAL or INTEGER; Piccolo reads its text form into a Decimal. For money (at
# most 15 significant digits) str(float) and SQLite's "%.15g" agree, so Numeric needs no formatter.
_SQLITE_FORMAT: dict[str, Callable[[Iterable[Any]], list[Any]]] = {
    "Timestamptz": _sqlite_timestamptz_column,
    "Timestamp": _sqlite_timestamp_column,
    "Boolean": _sqlite_boolean_column,
}
# asyncpg returns date, Decimal, bool and int, whose str() is what rows_to_csv writes; datetimes need 'T'.
_POSTGRES_FORMAT: dict[str, Callable[[Iterable[Any]], list[Any]]] = {
    "Timestamptz": _iso_datetime_column,
    "Timestamp": _iso_datetime_column,
}


def _csv_field(value: str) -> str:
    """One field written by csv.writer itself (for the rare values whose quoting varies by Python version)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([value, ""])
    return buf.getvalue()[:-2]  # without the empty second field's ",\n"


def _quoted(value: str) -> str:
    if "," in value or '"' in value or "\n" in value:  # always quoted, quotes doubled
        return '"' + value.replace('"', '""') + '"'
    return _csv_field(value)  # a lone '\r': whether it is quoted depends on the Python version


def _csv_column(values: Sequence[Any]) -> Sequence[str]:
    """A column's fields exactly as csv.writer (QUOTE_MINIMAL) writes them: str(), None as empty, quoting."""
    column = values
    try:
        probe = "\x1e".join(column)  # a text column without NULLs needs no conversion at all
    except TypeError:
        if None in values:
            column = ["" if v is None else v if v.__class__ is str else str(v) for v in values]
        else:
            column = list(map(str, values))
        probe = "\x1e".join(column)
    if "," in probe or '"' in probe or "\n" in probe or "\r" in probe:  # only then may a field be quoted
        column = [_quoted(v) if ("," in v or '"' in v or "\n" in v or "\r" in v) else v for v in column]
    return column


def _to_csv(header: list[str], columns: list[Sequence[Any]]) -> bytes:
    """Equal to csv.writer(lineterminator="\\n") writing the header and the rows, column-wise and faster."""
    fields = [_csv_column(c) for c in columns]
    lines = [",".join(_csv_column(list(header))), *map(",".join, zip(*fields, strict=True))]
    return ("\n".join(lines) + "\n").encode()


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
    select_query = table.select(*select_columns(dataset)).where(where).order_by(table.id).limit(cap)
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
    formats: dict[str, Callable[[Iterable[Any]], list[Any]]],
) -> DatasetExport:
    columns = dataset.export_columns
    by_column: list[Any] = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    for j, kind in enumerate(types):
        fmt = formats.get(kind)
        if fmt is not None:
            by_column[j] = fmt(by_column[j])
    data = _to_csv(columns, by_column)
    text_columns = [(j, by_column[j]) for j, kind in enumerate(types) if kind not in _NOT_TEXT]
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
