"""Rows coming into a company-defined dataset: from a file (backend/convert/rows.py) or a sync source
(records/sync.py). One path for both: each row's values checked by `values.coerce_value` (the check proposed
changes use), matched to the dataset's rows by the external key, and counted as added, changed, unchanged or
refused (each refusal with its row number and reason; at most `REFUSALS_LISTED` listed, all counted).

Never half-applied: an applied import or sync runs in ONE database transaction (rows and its audit entry),
so it commits whole or leaves nothing. Chosen over a resumable import because a resumable one leaves a
dataset half old and half new between its steps, visible to every reader and every run staged meanwhile;
PostgreSQL holds a million-row transaction without trouble (measured by `cleanroom bench imports`), and a
failed one is simply run again. Memory stays bounded: rows are read and written in batches of `BATCH`; what
grows with the file is the set of keys seen (for duplicate keys), a few tens of bytes a row.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from backend import db
from backend.records.columns import ColumnKind
from backend.records.datasets import DefinedDataset
from backend.records.tables import DatasetRow
from backend.records.values import TEXT_MAX, ColumnSpec, ValueProblem, coerce_value, to_json

BATCH = 5000
REFUSALS_LISTED = 100
KEY_MAX = 200  # dataset_row.external_key's length
INFER_SAMPLE = 1000
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


@dataclass
class Refusal:
    row: int
    reason: str


@dataclass
class ImportReport:
    dataset: str
    applied: bool
    rows_read: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    refused: int = 0
    refusals: list[Refusal] = field(default_factory=list)
    refusals_listed: int = REFUSALS_LISTED  # at most this many refusals are listed; `refused` counts them all
    ignored_columns: list[str] = field(default_factory=list)
    sha256: str = ""

    def refuse(self, row: int, reason: str) -> None:
        self.refused += 1
        if len(self.refusals) < REFUSALS_LISTED:
            self.refusals.append(Refusal(row, reason))

    def summary(self) -> dict[str, Any]:
        """What the audit entry keeps: counts, no record value."""
        return {
            "dataset": self.dataset,
            "applied": self.applied,
            "rows_read": self.rows_read,
            "added": self.added,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "refused": self.refused,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "sha256": self.sha256,
            "refusals": [{"row": r.row, "reason": r.reason} for r in self.refusals],
            "refusals_listed": self.refusals_listed,
            "refusals_not_listed": self.refused - len(self.refusals),
            "ignored_columns": self.ignored_columns,
        }


class ImportRefused(ValueError):
    """The whole import is refused (no key column, unknown dataset ...); nothing was written."""


# --- kind inference ----------------------------------------------------------------------------------------


def column_name(header: str) -> str:
    """A header as a column name: lower case, words joined by underscores ("Order ID" -> "order_id")."""
    name = re.sub(r"[^a-z0-9]+", "_", header.strip().lower()).strip("_")[:63]
    if not name or not name[0].isalpha():
        name = f"c_{name}"[:63]
    return name


def _kind_of_text(value: str) -> ColumnKind:
    text = value.strip()
    if re.fullmatch(r"[+-]?\d{1,18}", text):
        return ColumnKind.integer
    try:
        if Decimal(text).is_finite() and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
            return ColumnKind.number
    except InvalidOperation:
        pass
    if text.lower() in ("true", "false"):
        return ColumnKind.boolean
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            dt.date.fromisoformat(text)
            return ColumnKind.date
        except ValueError:
            return ColumnKind.string
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", text):
        try:
            dt.datetime.fromisoformat(text)
            return ColumnKind.datetime
        except ValueError:
            return ColumnKind.string
    return ColumnKind.string


_WIDER = {
    (ColumnKind.integer, ColumnKind.number): ColumnKind.number,
    (ColumnKind.number, ColumnKind.integer): ColumnKind.number,
    (ColumnKind.date, ColumnKind.datetime): ColumnKind.datetime,
    (ColumnKind.datetime, ColumnKind.date): ColumnKind.datetime,
}


def infer_columns(header: list[str], rows: Iterable[list[str]]) -> list[ColumnSpec]:
    """Each header's column with the narrowest kind all its (non-empty) sampled values fit; text otherwise.
    Shown for confirmation before anything is written (the dry run of a new dataset)."""
    names = [column_name(h) for h in header]
    seen: set[str] = set()
    for i, name in enumerate(names):
        base, n = name, 2
        while name in seen:
            name = f"{base}_{n}"[:63]
            n += 1
        names[i] = name
        seen.add(name)
    kinds: list[ColumnKind | None] = [None] * len(names)
    for row in rows:
        for i, value in enumerate(row[: len(names)]):
            if value.strip() == "" or kinds[i] is ColumnKind.string:
                continue
            kind = _kind_of_text(value)
            current = kinds[i]
            if current is None or current == kind:
                kinds[i] = kind
            else:
                kinds[i] = _WIDER.get((current, kind), ColumnKind.string)
    return [
        ColumnSpec(
            name,
            kind or ColumnKind.string,
            True,
            TEXT_MAX if (kind or ColumnKind.string) is ColumnKind.string else None,
        )
        for name, kind in zip(names, kinds, strict=True)
    ]


# --- the one path rows take in -----------------------------------------------------------------------------


@dataclass
class Ownership:
    """Who a new row belongs to (rows already there keep theirs)."""

    owner_id: int
    team_id: int | None = None
    visibility: str = "company"


def _prepare(
    dataset: DefinedDataset,
    header: list[str],
    rows: Iterable[tuple[int, list[Any]]],
    report: ImportReport,
    *,
    from_text: bool,
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(row number, key, values as stored) for each acceptable row; refusals go to `report`."""
    positions: dict[str, int] = {}
    for i, h in enumerate(header):
        name = h if h in dataset.fields else column_name(h)
        if name in dataset.fields and name not in positions:
            positions[name] = i
        else:
            report.ignored_columns.append(h)
    if dataset.key_column not in positions:
        raise ImportRefused(
            f"the file has no column {dataset.key_column!r}, the key of dataset {dataset.name!r} "
            f"(its columns: {', '.join(header[:20])})"
        )
    specs = [(spec, positions.get(spec.name)) for spec in dataset.columns]
    key_at = positions[dataset.key_column]
    keys_seen: set[str] = set()
    for number, cells in rows:
        report.rows_read += 1
        raw_key = cells[key_at] if key_at < len(cells) else ""
        key = "" if raw_key is None else str(raw_key).strip()
        if not key:
            report.refuse(number, f"the key column {dataset.key_column} is empty")
            continue
        if len(key) > KEY_MAX:
            report.refuse(number, f"the key is longer than {KEY_MAX} characters")
            continue
        if key in keys_seen:
            report.refuse(number, f"key {key[:40]!r} appears again (an earlier row has it)")
            continue
        values: dict[str, Any] = {}
        try:
            for spec, at in specs:
                if at is None:
                    continue
                value = cells[at] if at < len(cells) else ("" if from_text else None)
                if not from_text and value is not None and spec.kind is ColumnKind.string:
                    value = value if isinstance(value, str) else str(value)
                values[spec.name] = to_json(coerce_value(spec, value, from_text=from_text))
        except ValueProblem as exc:
            report.refuse(number, str(exc)[:300])
            continue
        keys_seen.add(key)
        yield number, key, values


def _batches(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _existing(dataset: DefinedDataset, keys: list[str]) -> dict[str, dict[str, Any]]:
    if db.is_postgres():
        rows = await DatasetRow.raw(
            'SELECT external_key, "values"::text AS v FROM dataset_row WHERE dataset = {} '
            "AND external_key = ANY({}::text[])",
            dataset.id,
            keys,
        )
    else:
        rows = await DatasetRow.select(
            DatasetRow.external_key, DatasetRow.values.as_alias("v")
        ).where((DatasetRow.dataset == dataset.id) & DatasetRow.external_key.is_in(keys))
    out = {}
    for row in rows:
        value = row["v"]
        out[row["external_key"]] = json.loads(value) if isinstance(value, str | bytes) else (value or {})
    return out


async def _write(
    dataset: DefinedDataset, owner: Ownership, upserts: list[tuple[str, dict[str, Any]]], now: dt.datetime
) -> None:
    if not upserts:
        return
    sql = (
        'INSERT INTO dataset_row (company, dataset, external_key, owner, team, visibility, "values", '
        "created_at, updated_at, version) {} "
        'ON CONFLICT (dataset, external_key) DO UPDATE SET "values" = excluded."values", '
        "updated_at = excluded.updated_at, version = dataset_row.version + 1"
    )
    if db.is_postgres():
        source = (
            "SELECT {}, {}, k, {}, {}::int, {}, v::jsonb, {}, {}, 1 "
            "FROM unnest({}::text[], {}::text[]) AS t(k, v)"
        )
        await DatasetRow.raw(
            sql.format(source),
            dataset.company_id,
            dataset.id,
            owner.owner_id,
            owner.team_id,
            owner.visibility,
            now,
            now,
            now,
            [k for k, _ in upserts],
            [json.dumps(v, separators=(",", ":")) for _, v in upserts],
        )
        return
    for key, values in upserts:
        await DatasetRow.raw(
            sql.format("VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, 1)"),
            dataset.company_id,
            dataset.id,
            key,
            owner.owner_id,
            owner.team_id,
            owner.visibility,
            json.dumps(values, separators=(",", ":")),
            now,
            now,
        )


async def load_rows(
    dataset: DefinedDataset,
    header: list[str],
    rows: Iterable[tuple[int, list[Any]]],
    *,
    apply: bool,
    owner: Ownership,
    from_text: bool = True,
    report: ImportReport | None = None,
) -> ImportReport:
    """Count (and, with `apply`, write) `rows` into `dataset`. The caller holds the transaction when applying
    (`apply_rows`), so a failure part-way leaves nothing."""
    report = report or ImportReport(dataset=dataset.name, applied=apply)
    now = dt.datetime.now(dt.UTC)
    prepared = _prepare(dataset, header, rows, report, from_text=from_text)
    for batch in _batches(prepared, BATCH):
        existing = await _existing(dataset, [key for _, key, _ in batch])
        upserts: list[tuple[str, dict[str, Any]]] = []
        for _number, key, values in batch:
            before = existing.get(key)
            if before is None:
                report.added += 1
            elif {**before, **values} == before:
                report.unchanged += 1
                continue
            else:
                report.changed += 1
                values = {**before, **values}  # columns the file does not have keep their values
            upserts.append((key, values))
        if apply:
            await _write(dataset, owner, upserts, now)
    return report


async def apply_rows(
    dataset: DefinedDataset,
    header: list[str],
    rows: Iterable[tuple[int, list[Any]]],
    *,
    owner: Ownership,
    audit_action: str,
    actor: str,
    audit_data: dict[str, Any],
    from_text: bool = True,
    report: ImportReport | None = None,
) -> ImportReport:
    """`load_rows(apply=True)` and its audit entry in one transaction: whole or nothing."""
    from backend.audit import service as audit

    async with DatasetRow._meta.db.transaction():
        report = await load_rows(
            dataset, header, rows, apply=True, owner=owner, from_text=from_text, report=report
        )
        await audit.record(
            audit_action,
            actor=actor,
            company_id=dataset.company_id,
            subject_type="dataset",
            subject_id=dataset.id,
            data={**audit_data, **report.summary()},
        )
    return report
