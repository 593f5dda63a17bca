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

import asyncio
import contextlib
import datetime as dt
import gc
import itertools
import queue
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from backend.audit import service as audit
from backend.convert.rows import ImportFileRefused, RowLimits, RowStream, stream_rows
from backend.errors import Conflict, Forbidden, Invalid
from backend.hashing import sha256_file
from backend.records import defined
from backend.records.columns import ColumnKind
from backend.records.datasets import DefinedDataset
from backend.records.defined import RowDefaults
from backend.records.tables import DatasetRow
from backend.records.values import TEXT_MAX, ColumnSpec
from backend.records.visibility import find_dataset
from backend.settings import get_settings
from backend.tenancy.context import UserContext

BATCH = 5000
REFUSALS_LISTED = 100
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

OWNERSHIP_COLUMNS = ("owner_email", "team", "visibility")


def _positions(dataset: DefinedDataset, header: list[str], report: ImportReport) -> dict[str, int]:
    """Which cell holds which column: a header naming a column (as is, or as `column_name` spells it), or one of
    the ownership columns `defined.upsert_rows` reads; other headers are ignored and listed in the report."""
    fields = set(dataset.fields) | set(OWNERSHIP_COLUMNS)
    positions: dict[str, int] = {}
    for i, h in enumerate(header):
        name = h if h in fields else column_name(h)
        if name in fields and name not in positions:
            positions[name] = i
        else:
            report.ignored_columns.append(h[:100])
    if dataset.key_column not in positions:
        raise ImportRefused(
            f"the file has no column {dataset.key_column!r}, the key of dataset {dataset.name!r} "
            f"(its columns: {', '.join(h[:40] for h in header[:20])})"
        )
    return positions


def _chunks(
    rows: Iterable[tuple[int, list[Any]]], positions: dict[str, int], report: ImportReport, from_text: bool
) -> Iterator[tuple[list[int], list[dict[str, Any]]]]:
    """Rows as `upsert_rows` takes them, BATCH at a time, with their row numbers."""
    numbers: list[int] = []
    mapped: list[dict[str, Any]] = []
    empty = "" if from_text else None
    for number, cells in rows:
        report.rows_read += 1
        width = len(cells)
        numbers.append(number)
        mapped.append({name: cells[at] if at < width else empty for name, at in positions.items()})
        if len(mapped) >= BATCH:
            yield numbers, mapped
            numbers, mapped = [], []
    if mapped:
        yield numbers, mapped


class Loader:
    """Rows into `dataset` through `defined`'s one path (`prepare_rows` → `settle_rows` → `write_rows`, the
    steps of `upsert_rows`), one chunk per `feed`. A key repeated in a later chunk is refused here. The
    caller holds the transaction when applying.

    A chunk's values are checked in a thread (`prepare_rows` touches no database). With `overlap=True` (the
    import's and the sync's own loops) that runs while the previous chunk's write runs on the database, the
    write being awaited before the next chunk reads the stored rows, so one connection never has two
    statements at once; the caller then calls `finish` before it commits (and `abandon` when it fails), and a
    write that fails is raised at the next `feed` or at `finish`, inside its transaction, which rolls back
    whole. Without it, `feed` returns with its rows written."""

    def __init__(
        self,
        dataset: DefinedDataset,
        positions: dict[str, int],
        directory: defined.Directory,
        *,
        apply: bool,
        defaults: RowDefaults,
        from_text: bool,
        report: ImportReport,
        overlap: bool = False,
        reader: UserContext | None = None,
        fresh: bool = False,
    ) -> None:
        self.dataset, self.positions, self.directory = dataset, positions, directory
        self.overlap, self.reader, self.fresh = overlap, reader, fresh
        self.apply, self.defaults, self.from_text, self.report = apply, defaults, from_text, report
        self.keys_seen: set[str] = set()
        self.plan = defined.row_plan(dataset, from_text=from_text)
        self.writing: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        dataset: DefinedDataset,
        header: list[str],
        *,
        apply: bool,
        defaults: RowDefaults,
        from_text: bool = True,
        report: ImportReport | None = None,
        overlap: bool = False,
        reader: UserContext | None = None,
        fresh: bool = False,
    ) -> Loader:
        report = report or ImportReport(dataset=dataset.name, applied=apply)
        positions = _positions(dataset, header, report)
        directory = await defined.Directory.load(dataset.company_id)
        defined.check_defaults(defaults, directory)
        return cls(
            dataset,
            positions,
            directory,
            apply=apply,
            defaults=defaults,
            from_text=from_text,
            report=report,
            overlap=overlap,
            reader=reader,
            fresh=fresh,
        )

    async def feed(self, rows: Iterable[tuple[int, list[Any]]]) -> None:
        try:
            for numbers, chunk in _chunks(rows, self.positions, self.report, self.from_text):
                await self._chunk(numbers, chunk)
        except BaseException:
            if not self.overlap:
                await self.abandon()
            raise
        if not self.overlap:
            await self.finish()

    async def finish(self) -> None:
        """Wait for the last chunk's write (raising its error)."""
        writing, self.writing = self.writing, None
        if writing is not None:
            await writing

    async def abandon(self) -> None:
        """The import failed: stop the write in flight and wait until it has (its own error is not the one
        to report), so the caller's transaction rolls back on a connection no statement holds."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.cancel()
            await asyncio.wait([writing])
            if not writing.cancelled():
                writing.exception()  # retrieved: the import's own error is raised instead

    async def _chunk(self, numbers: list[int], chunk: list[dict[str, Any]]) -> None:
        report, key_at = self.report, self.dataset.key_column
        fresh_numbers, fresh = [], []
        for number, row in zip(numbers, chunk, strict=True):
            raw = row.get(key_at)
            key = "" if raw is None else str(raw).strip()
            if key and key in self.keys_seen:
                report.refuse(number, f"key {key[:40]!r} appears again (an earlier row has it)")
                continue
            if key:
                self.keys_seen.add(key)
            fresh_numbers.append(number)
            fresh.append(row)
        prepared = await asyncio.to_thread(defined.prepare_rows, self.plan, fresh, self.directory, 0)
        await self.finish()  # the previous chunk's write, overlapped with the checks above
        result = defined.UpsertResult()
        writes = await defined.settle_rows(
            self.dataset, prepared, self.defaults, result, self.reader, fresh=self.fresh
        )
        if writes and self.apply:
            self.writing = asyncio.create_task(defined.write_rows(self.dataset, writes, fresh=self.fresh))
        report.added += result.added
        report.changed += result.changed
        report.unchanged += result.unchanged
        for refusal in result.refused:
            report.refuse(fresh_numbers[refusal.row], refusal.reason[:300])


async def load_rows(
    dataset: DefinedDataset,
    header: list[str],
    rows: Iterable[tuple[int, list[Any]]],
    *,
    apply: bool,
    defaults: RowDefaults,
    from_text: bool = True,
    report: ImportReport | None = None,
) -> ImportReport:
    """Count (and, with `apply`, write) `rows` — (row number, cells under `header`) — into `dataset`."""
    loader = await Loader.start(
        dataset, header, apply=apply, defaults=defaults, from_text=from_text, report=report, overlap=True
    )
    try:
        await loader.feed(rows)
    except BaseException:
        await loader.abandon()
        raise
    await loader.finish()
    return loader.report


# --- importing a file: the service the API, the CLI and the console call -----------------------------------


def row_limits() -> RowLimits:
    settings = get_settings()
    return RowLimits(
        max_rows=settings.import_max_rows,
        max_input_bytes=settings.import_max_bytes,
        time_limit_seconds=settings.import_time_limit_seconds,
    )


def _require_importer(ctx: UserContext, name: str) -> None:
    """A person (a session or the operator: never the assistant's token, never an auditor) who may change the
    dataset: an admin, or whoever the dataset's permissions grant `edit`."""
    ctx.require_person("importing into a dataset")
    if not ctx.can(name, "edit"):
        raise Forbidden(
            f"{ctx.email} has no permission to change {name}: ask a company admin for edit access to it",
            code="dataset_forbidden",
        )


async def _open(path: Path, filename: str) -> RowStream:
    try:
        return await asyncio.to_thread(stream_rows, path, filename, row_limits())
    except ImportFileRefused as exc:
        raise Invalid(str(exc), code="import_file_refused") from exc


async def _take(rows: Iterator[tuple[int, list[str]]], n: int) -> list[tuple[int, list[str]]]:
    try:
        return await asyncio.to_thread(lambda: list(itertools.islice(rows, n)))
    except ImportFileRefused as exc:
        raise Invalid(str(exc), code="import_file_refused") from exc


async def preview_file(ctx: UserContext, path: Path, filename: str) -> dict[str, Any]:
    """The file's columns with their inferred kinds (from its first `INFER_SAMPLE` rows), for a person to
    confirm before a new dataset is defined from it. Nothing is written."""
    ctx.require_person("importing a file")
    stream = await _open(path, filename)
    try:
        sample = await _take(stream.rows, INFER_SAMPLE)
    finally:
        stream.rows.close()
    columns = infer_columns(stream.header, [cells for _, cells in sample])
    return {
        "kind": stream.kind,
        "header": stream.header,
        "columns": [c.describe() for c in columns],
        "sampled_rows": len(sample),
    }


async def import_file(
    ctx: UserContext,
    name: str,
    path: Path,
    filename: str,
    *,
    dry_run: bool,
    create: defined.DatasetSpec | None = None,
    defaults: RowDefaults | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Import the file at `path` into dataset `name` (upsert by its key), or only say what it would do
    (`dry_run`). `create`: the dataset does not exist yet; it is defined from this spec (the inferred columns,
    as the person confirmed them) when the import is applied. The applied import is one transaction with its
    audit entry (the file's sha256 and the counts)."""
    if create is not None:
        if create.name != name:
            raise Invalid("the new dataset's name and the import's dataset differ")
        defined._require_admin(ctx, "defining a dataset")
        spec = defined.check_spec(create)
        if await find_dataset(ctx.company_id, name) is not None:
            raise Conflict(f"this company already has a dataset named {name!r}", code="dataset_exists")
        dataset = DefinedDataset(
            id=-1,
            company_id=ctx.company_id,
            name=spec.name,
            label=spec.label,
            columns=tuple(spec.columns),
            key_column=spec.key_column,
            writable=tuple(spec.writable or [c.name for c in spec.columns]),
        )
    else:
        _require_importer(ctx, name)
        dataset = await defined.get_defined(ctx.company_id, name)
    defaults = defaults or RowDefaults(owner_id=ctx.user_id)
    sha256 = await asyncio.to_thread(sha256_file, path)
    stream = await _open(path, filename)
    report = ImportReport(dataset=name, applied=not dry_run, sha256=sha256)
    try:
        if dry_run:
            await _feed(dataset, stream, False, defaults, report, progress, ctx)
        else:
            if create is not None:
                dataset = await defined.define_dataset(ctx, spec)
            async with DatasetRow._meta.db.transaction():
                # a dataset with no rows yet (a first import): held so, its rows are COPYed in, none looked up
                fresh = await defined.claim_empty(dataset)
                await _feed(dataset, stream, True, defaults, report, progress, ctx, fresh)
                await audit.record(
                    "dataset.imported",
                    actor=ctx.actor,
                    company_id=ctx.company_id,
                    subject_type="dataset",
                    subject_id=dataset.id,
                    data={"file_sha256": sha256, "file_kind": stream.kind, **report.summary()},
                )
            # committed: the planner told of a large load before the next import looks rows up by key
            await defined.refresh_statistics(dataset, report.added)
    except ImportRefused as exc:
        raise Invalid(str(exc), code="import_refused") from exc
    finally:
        stream.rows.close()
    return report.as_dict()


# The cyclic garbage collector's first threshold while rows come in. Each row makes a few containers (its cells,
# its values), freed by reference counting as its chunk is written; at Python's default (a collection every 700
# new containers) the collector ran ~3,000 times per 200,000 rows and took a third of the importing process's
# CPU (1.7 of 5.1 s, `cleanroom bench imports` / docs/datasets.md). Collections still run, 70 times less often.
IMPORT_GC_THRESHOLD = 50_000
_collecting: list[tuple[int, int, int]] = []  # the thresholds to restore, while any import runs


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's first threshold while this block runs (nested or concurrent imports: the first
    to start saves Python's thresholds, the last to end restores them)."""
    if not _collecting:
        _collecting.append(gc.get_threshold())
        gc.set_threshold(max(IMPORT_GC_THRESHOLD, _collecting[0][0]), *_collecting[0][1:])
    else:
        _collecting.append(_collecting[0])
    try:
        yield
    finally:
        saved = _collecting.pop()
        if not _collecting:
            gc.set_threshold(*saved)


async def _feed(
    dataset: DefinedDataset,
    stream: RowStream,
    apply: bool,
    defaults: RowDefaults,
    report: ImportReport,
    progress: Callable[[int], None] | None,
    reader: UserContext,
    fresh: bool = False,
) -> None:
    # the importer's own view: a stored row they may not see is refused, not compared (defined.settle_rows)
    loader = await Loader.start(
        dataset,
        stream.header,
        apply=apply,
        defaults=defaults,
        report=report,
        overlap=True,
        reader=reader,
        fresh=fresh,
    )
    try:
        with fewer_collections():
            async for chunk in _prefetched(stream.rows):
                await loader.feed(chunk)
                if progress is not None:
                    progress(report.rows_read)
    except BaseException:
        await loader.abandon()
        raise
    await loader.finish()


PREFETCH_CHUNKS = 3  # chunks read ahead from the converter child while the previous ones are written


async def _prefetched(rows: Iterator[tuple[int, list[str]]]) -> AsyncIterator[list[tuple[int, list[str]]]]:
    """`rows` in chunks of BATCH, read by a thread of its own up to PREFETCH_CHUNKS ahead: the converter child
    keeps parsing while the database writes (its pipe alone holds a few hundred rows). Memory: at most
    PREFETCH_CHUNKS + 1 chunks. A reading error is raised here, in order, as ImportFileRefused → Invalid."""
    chunks: queue.Queue[Any] = queue.Queue(maxsize=PREFETCH_CHUNKS)
    stop = threading.Event()
    done = object()

    def read() -> None:
        try:
            while not stop.is_set():
                chunk = list(itertools.islice(rows, BATCH))
                if not chunk:
                    break
                chunks.put(chunk)
            chunks.put(done)
        except BaseException as exc:  # handed to the reader in order
            chunks.put(exc)

    reader = threading.Thread(target=read, daemon=True, name="import-reader")
    reader.start()
    try:
        while True:
            item = await asyncio.to_thread(chunks.get)
            if item is done:
                return
            if isinstance(item, ImportFileRefused):
                raise Invalid(str(item), code="import_file_refused") from item
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting on a full queue, then let it end
            with contextlib.suppress(queue.Empty):
                chunks.get_nowait()
            await asyncio.to_thread(reader.join, 0.05)
