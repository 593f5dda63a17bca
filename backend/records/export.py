"""Dataset exports as CSV: the one writer, for staged bundles and for `cleanroom records --format csv`.

The rows are the records API's: `require_dataset` (the dataset permission), then `visible_where` (THE
visibility rule), oldest first, at most `cap`. Values are written as the API shows them: None as an empty
field, dates and times in ISO form, everything else as str(). The writer works a column at a time (one
C-level pass per column instead of csv.writer's per-field calls); its bytes equal csv.writer's with
lineterminator "\\n" (tests hold it to that on awkward values).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from piccolo.querystring import QueryString

from backend.records.columns import ColumnKind
from backend.records.datasets import AnyDataset
from backend.records.service import select_columns
from backend.records.visibility import require_dataset, visible_where
from backend.tenancy.context import UserContext


@dataclass
class DatasetExport:
    dataset: AnyDataset
    columns: list[str]
    values: list[Sequence[Any]]  # one sequence per column, in row order, as written (datetimes in ISO form)
    csv: bytes
    rows: int
    visible_total: int
    versions: dict[int, int] = field(default_factory=dict)  # record id -> version, as exported

    @property
    def truncated(self) -> bool:
        return self.visible_total > self.rows


_TOTAL = "cleanroom_visible_total"  # the count beside every row: no dataset has a field of that name


@dataclass
class VisibleRows:
    """The rows of a dataset a run may see, as the database driver returned them, before the CSV is built."""

    dataset: AnyDataset
    rows: Sequence[Mapping[str, Any]]
    visible_total: int

    def export(self) -> DatasetExport:
        return build_export(self.dataset, self.rows, self.visible_total)


async def visible_rows(ctx: UserContext, dataset_name: str, cap: int) -> VisibleRows:
    """The rows a run may see, oldest first, at most `cap`, and how many it may see in all: one statement, so
    both are read from one snapshot (it was a transaction of four round trips: BEGIN, the count, the rows,
    COMMIT). Inside the caller's transaction it runs on that transaction's connection, which sees its writes."""
    dataset = await require_dataset(ctx, dataset_name)
    table = dataset.table
    where = visible_where(ctx, dataset)
    count_query = table.count().where(where)
    (count_sql,) = count_query.querystrings
    total = QueryString(f'({{}}) AS "{_TOTAL}"', count_sql)
    select_query = table.select(*select_columns(dataset), total).where(where).order_by(table.id).limit(cap)
    (select_sql,) = select_query.querystrings
    rows = await table._meta.db.run_querystring(select_sql)
    if rows:
        return VisibleRows(dataset, dataset.decode(rows, typed=False), int(rows[0][_TOTAL]))
    return VisibleRows(dataset, rows, 0 if cap > 0 else await count_query)  # no row: none visible, or no room


def build_export(
    dataset: AnyDataset, rows: Sequence[Mapping[str, Any]], visible_total: int | None = None
) -> DatasetExport:
    """Rows as the records API returns them, each read by export column → the export and its CSV.
    `visible_rows` gives the rows as the database driver returns them (asyncpg's records, SQLite's
    dicts): Piccolo's copy of every row into a dict cost more than the export itself."""
    columns = dataset.export_columns
    types = dataset.export_types
    values: list[Sequence[Any]] = []
    for name in columns:
        column = [row[name] for row in rows]
        if types[name] is ColumnKind.datetime:  # a company-defined row's are ISO text already (decode)
            column = [v if v is None or v.__class__ is str else v.isoformat() for v in column]
        values.append(column)
    versions = dict(zip(values[0], values[columns.index("version")], strict=True)) if rows else {}
    total = len(rows) if visible_total is None else visible_total
    return DatasetExport(dataset, columns, values, to_csv(columns, values), len(rows), total, versions)


def to_csv(header: Sequence[str], columns: Sequence[Sequence[Any]]) -> bytes:
    """Equal to csv.writer(lineterminator="\\n") writing the header and the rows, column-wise and faster."""
    fields = [_csv_column(c) for c in columns]
    lines = [",".join(_csv_column(list(header))), *map(",".join, zip(*fields, strict=True))]
    return ("\n".join(lines) + "\n").encode()


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


def _quoted(value: str) -> str:
    if "," in value or '"' in value or "\n" in value:  # always quoted, quotes doubled
        return '"' + value.replace('"', '""') + '"'
    return _csv_field(value)  # a lone '\r': whether it is quoted depends on the Python version


def _csv_field(value: str) -> str:
    """One field written by csv.writer itself (for the rare values whose quoting varies by Python version)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([value, ""])
    return buf.getvalue()[:-2]  # without the empty second field's ",\n"
