"""Imports and syncs of company-defined datasets as background jobs (issue 54): a million-row import over HTTP
never runs inside the request.

`POST /api/datasets/{name}/import` (and `…/sync`) checks who asks and what, at once (a refusal is the request's
answer), keeps the uploaded file in the data directory, writes a `dataset_job` row (`queued`) and answers 202
with it. The process that runs the queue (the in-process worker, `serve`'s local worker process, or a fleet's
leading dispatcher: each calls `start_queued` at every pass of its loop and is woken by `announce`) claims the
job (`queued` → `running`, conditionally: two loops never run one job), runs the import's one service
(`importing.import_file`, or `sync.sync_dataset`) as the person who started it — their permissions read afresh
when it starts — and ends it `done` with the report, or `failed` with the reason. The file is removed when the
job ends, whatever the end. An applied import is one transaction (records/importing.py), so a failed job has
applied nothing; a job left `running` by a process that died ends `failed` (`interrupted`) at the next pass.

Progress: `rows_read` while running is the import's `progress` hook, written to a small file beside the kept
upload (not the database: on SQLite the import's own transaction holds the write lock until it commits);
`rows_total` is known when a dry run of the same file (same sha256, same dataset) ended before.

Who sees a job: the person who started it, and the admins of its company; anyone else (another member,
another company's admin) gets 404, as for a job that does not exist."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend import filemodes
from backend.errors import AppError, Conflict, NotFound
from backend.records import defined, importing, sync
from backend.records.job_tables import DatasetJob
from backend.records.sync_tables import DatasetSource
from backend.records.values import ColumnSpec
from backend.records.visibility import find_dataset
from backend.settings import get_settings
from backend.tenancy.context import SESSION, UserContext, load_user_context

log = logging.getLogger("cleanroom.records.jobs")

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
JOBS_DIR = "dataset-jobs"
RECOVER_EVERY_SECONDS = 30.0


# --- waking whatever runs the queue ----------------------------------------------------------------------

_listeners: list[Callable[[], None]] = []


def listen(callback: Callable[[], None]) -> None:
    """Call `callback` (cheap, thread-safe) when a job is queued. The app forwards this to the runs' own wake
    (`runs.queued.announce`), which the worker, `serve`'s local worker and a fleet's dispatcher all hear."""
    if callback not in _listeners:
        _listeners.append(callback)


def announce() -> None:
    for callback in list(_listeners):
        try:
            callback()
        except Exception:
            log.warning("a dataset-job listener failed and was dropped", exc_info=True)
            with contextlib.suppress(ValueError):
                _listeners.remove(callback)


# --- the kept file and the progress file ------------------------------------------------------------------


def jobs_dir() -> Path:
    return Path(get_settings().data_dir) / JOBS_DIR


def job_dir(row: dict[str, Any]) -> Path | None:
    """The folder holding a job's kept file and its progress (None: a sync, or a job that ended)."""
    return Path(row["file_path"]).parent if row.get("file_path") else None


def _write_progress(folder: Path, rows: int) -> None:
    with contextlib.suppress(OSError):  # progress is a display: never the job's failure
        temporary = folder / "progress.tmp"
        temporary.write_text(str(rows))
        temporary.replace(folder / "progress")


def _read_progress(folder: Path | None) -> int | None:
    if folder is None:
        return None
    try:
        return int((folder / "progress").read_text() or 0)
    except (OSError, ValueError):
        return None


def _discard_files(folder: Path | None) -> None:
    if folder is not None and folder.parent == jobs_dir():  # never anything outside the jobs' folder
        shutil.rmtree(folder, ignore_errors=True)


# --- starting a job (the API's request) -------------------------------------------------------------------


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def _insert(ctx: UserContext, name: str, kind: str, **fields: Any) -> int:
    row = DatasetJob(
        company=ctx.company_id,
        started_by=ctx.user_id,
        session_id=ctx.session_id,
        dataset_name=name,
        kind=kind,
        created_at=_now(),
        **fields,
    )
    await row.save()
    return int(row.id)


async def queue_import(
    ctx: UserContext,
    name: str,
    spooled: Path,
    filename: str,
    sha256: str,
    *,
    dry_run: bool,
    create: defined.DatasetSpec | None = None,
) -> dict[str, Any]:
    """Check the person and the dataset now (the same checks `importing.import_file` makes again when the job
    runs), keep the spooled file with the job, queue it. The caller's `spooled` file is moved (taken)."""
    if create is not None:
        if create.name != name:
            raise AppError("the new dataset's name and the import's dataset differ", code="invalid")
        defined._require_admin(ctx, "defining a dataset")
        defined.check_spec(create)
        if await find_dataset(ctx.company_id, name) is not None:
            raise Conflict(f"this company already has a dataset named {name!r}", code="dataset_exists")
    else:
        importing._require_importer(ctx, name)
        await defined.get_defined(ctx.company_id, name)  # 404 for an unknown one (another company's too)
    new = ""
    if create is not None:
        new = json.dumps(
            {
                "label": create.label,
                "columns": [c.describe() for c in create.columns],
                "key_column": create.key_column,
                "writable": create.writable,
                "template": create.template,
            }
        )
    total = None
    if not dry_run:  # a dry run of the same file ended before: its count is this job's total
        earlier = (
            await DatasetJob.select(DatasetJob.rows_read)
            .where(
                (DatasetJob.company == ctx.company_id)
                & (DatasetJob.dataset_name == name)
                & (DatasetJob.file_sha256 == sha256)
                & (DatasetJob.dry_run == True)  # noqa: E712 - Piccolo's comparison
                & (DatasetJob.status == DONE)
            )
            .order_by(DatasetJob.id, ascending=False)
            .first()
        )
        total = earlier["rows_read"] if earlier else None
    # the file in its place before the job exists: a queued job is always whole
    folder = filemodes.private_dir(jobs_dir() / secrets.token_hex(12))
    kept = folder / "file"
    try:
        await asyncio.to_thread(shutil.move, spooled, kept)
        job_id = await _insert(
            ctx,
            name,
            "import",
            dry_run=dry_run,
            filename=filename[:255],
            file_path=str(kept),
            file_sha256=sha256,
            new_dataset=new,
            rows_total=total,
        )
    except BaseException:
        _discard_files(folder)
        raise
    announce()
    return await _shown(job_id)


async def queue_sync(ctx: UserContext, name: str) -> dict[str, Any]:
    """Sync now, as a job: the person and the dataset checked now; 404 `no_source` without a source."""
    importing._require_importer(ctx, name)
    dataset = await defined.get_defined(ctx.company_id, name)
    if not await DatasetSource.exists().where(DatasetSource.dataset == dataset.id):
        raise NotFound(f"dataset {name} has no sync source", code="no_source")
    job_id = await _insert(ctx, name, "sync")
    announce()
    return await _shown(job_id)


# --- what a job shows ---------------------------------------------------------------------------------------


async def _shown(job_id: int) -> dict[str, Any]:
    row = (
        await DatasetJob.select(*DatasetJob.all_columns(), DatasetJob.started_by.email)
        .where(DatasetJob.id == job_id)
        .first()
    )
    assert row is not None
    return describe(row)


def describe(row: dict[str, Any]) -> dict[str, Any]:
    rows_read = row["rows_read"]
    if row["status"] == RUNNING:
        rows_read = _read_progress(job_dir(row)) or rows_read
    return {
        "id": row["id"],
        "dataset": row["dataset_name"],
        "kind": row["kind"],
        "dry_run": row["dry_run"],
        "state": row["status"],
        "started_by": row.get("started_by.email", ""),
        "filename": row["filename"],
        "rows_read": rows_read,
        "rows_total": row["rows_total"],
        "report": json.loads(row["report"]) if row["report"] else None,
        "error": row["error"],
        "error_code": row["error_code"],
        "created_at": row["created_at"],
        "started_at": row["started_at"],
        "ended_at": row["ended_at"],
    }


async def get_job(ctx: UserContext, job_id: int) -> dict[str, Any]:
    """The job, to the person who started it or an admin of its company; 404 to anyone else."""
    ctx.require_person("following an import")
    row = (
        await DatasetJob.select(*DatasetJob.all_columns(), DatasetJob.started_by.email)
        .where((DatasetJob.id == job_id) & (DatasetJob.company == ctx.company_id))
        .first()
    )
    if row is None or not (ctx.is_admin or row["started_by"] == ctx.user_id):
        raise NotFound(f"no import or sync job {job_id}", code="unknown_job")
    return describe(row)


# --- running jobs (the worker's side) -----------------------------------------------------------------------


async def _claim(job_id: int) -> bool:
    from backend.sandbox.libvirt_conn import owner_token

    claimed = (
        await DatasetJob.update(
            {DatasetJob.status: RUNNING, DatasetJob.started_at: _now(), DatasetJob.worker: owner_token()}
        )
        .where((DatasetJob.id == job_id) & (DatasetJob.status == QUEUED))
        .returning(DatasetJob.id)
    )
    return bool(claimed)


async def _end(
    job_id: int, folder: Path | None, *, report: dict[str, Any] | None = None, error: str = "", code: str = ""
) -> None:
    fields: dict[Any, Any] = {
        DatasetJob.status: FAILED if error else DONE,
        DatasetJob.ended_at: _now(),
        DatasetJob.error: error[:2000],
        DatasetJob.error_code: code[:40],
        DatasetJob.file_path: "",
    }
    if report is not None:
        fields[DatasetJob.report] = json.dumps(report, default=str)
        fields[DatasetJob.rows_read] = int(report.get("rows_read", 0))
    elif (progress := _read_progress(folder)) is not None:
        fields[DatasetJob.rows_read] = progress
    await DatasetJob.update(fields).where(DatasetJob.id == job_id)


def _reason(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, AppError):
        detail = exc.detail
        text = detail.get("message", str(detail)) if isinstance(detail, dict) else str(detail)
        return text, exc.code
    if isinstance(exc, sync.SyncRefused):
        return str(exc), "sync_failed"  # already said without the connection string (records/sync.py)
    return f"the job failed inside the server ({type(exc).__name__}); see the server log", "internal"


async def run_job(job_id: int) -> None:
    """Run one queued job to its end (claimed here; a job another loop claimed first is left alone)."""
    if not await _claim(job_id):
        return
    row = await DatasetJob.select().where(DatasetJob.id == job_id).first()
    assert row is not None
    folder = job_dir(row)
    try:
        ctx = await load_user_context(row["started_by"], auth=SESSION, session_id=row["session_id"])
        if row["kind"] == "sync":
            importing._require_importer(ctx, row["dataset_name"])
            dataset = await defined.get_defined(ctx.company_id, row["dataset_name"])
            result = await sync.sync_dataset(dataset, actor=ctx.actor)
            result.pop("status", None)
            report = result
        else:
            create = None
            if row["new_dataset"]:
                new = json.loads(row["new_dataset"])
                create = defined.DatasetSpec(
                    name=row["dataset_name"],
                    label=new["label"],
                    columns=[ColumnSpec.read(c) for c in new["columns"]],
                    key_column=new["key_column"],
                    writable=new["writable"],
                    template=new.get("template") or "",
                )
            assert folder is not None, "an import job keeps its file"
            _write_progress(folder, 0)
            report = await importing.import_file(
                ctx,
                row["dataset_name"],
                Path(row["file_path"]),
                row["filename"],
                dry_run=row["dry_run"],
                create=create,
                progress=lambda rows: _write_progress(folder, rows),
            )
    except asyncio.CancelledError:
        await asyncio.shield(
            _end(
                job_id,
                folder,
                error="the server stopped during the job; nothing was applied",
                code="interrupted",
            )
        )
        _discard_files(folder)
        raise
    except Exception as exc:
        text, code = _reason(exc)
        if code == "internal":
            log.exception("dataset job %s failed", job_id)
        applied = "" if row["dry_run"] else "; nothing was applied"
        await _end(job_id, folder, error=text + applied, code=code)
    else:
        await _end(job_id, folder, report=report)
    finally:
        _discard_files(folder)


async def queued_ids() -> list[int]:
    rows = await DatasetJob.select(DatasetJob.id).where(DatasetJob.status == QUEUED).order_by(DatasetJob.id)
    return [r["id"] for r in rows]


async def recover() -> list[int]:
    """Jobs left `running` by a process that is gone end `failed` (`interrupted`); their files are removed.
    Their import applied nothing: it was one transaction, never committed."""
    from backend.sandbox.libvirt_conn import owner_alive

    ended = []
    for row in await DatasetJob.select(
        DatasetJob.id, DatasetJob.worker, DatasetJob.dry_run, DatasetJob.file_path
    ).where(DatasetJob.status == RUNNING):
        if owner_alive(row["worker"]):
            continue
        ended.append(row["id"])
        await DatasetJob.update(
            {
                DatasetJob.status: FAILED,
                DatasetJob.ended_at: _now(),
                DatasetJob.error: "the server stopped during the job"
                + ("" if row["dry_run"] else "; nothing was applied: start the import again"),
                DatasetJob.error_code: "interrupted",
                DatasetJob.file_path: "",
            }
        ).where((DatasetJob.id == row["id"]) & (DatasetJob.status == RUNNING))
        _discard_files(job_dir(row))
    await _sweep_orphans()
    return ended


ORPHAN_SECONDS = 3600


async def _sweep_orphans() -> None:
    """Folders of no queued or running job (a process that died between keeping a file and queueing its job),
    older than an hour, are removed."""
    import time

    folder = jobs_dir()
    if not folder.is_dir():
        return
    rows = await DatasetJob.select(DatasetJob.file_path).where(DatasetJob.status.is_in([QUEUED, RUNNING]))
    kept = {Path(r["file_path"]).parent.name for r in rows if r["file_path"]}
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):
            if entry.name not in kept and time.time() - entry.stat().st_mtime > ORPHAN_SECONDS:
                _discard_files(entry)


async def drain() -> None:
    """Run every queued job now, one after the other (tests, and whatever wants the queue empty)."""
    while ids := await queued_ids():
        for job_id in ids:
            await run_job(job_id)


_task: asyncio.Task[None] | None = None
_last_recovery = -1e18


def start_queued() -> None:
    """From the loops that run the queue (execution/queue.py, fleet/queue.py), at every pass: the queued jobs
    run in a task of their own, one job at a time per process, so an import never holds up the runs' dispatch."""
    global _task
    loop = asyncio.get_running_loop()
    if _task is not None and not _task.done() and _task.get_loop() is loop:
        return  # (a task of a loop that has ended, never done, is not waited for)
    _task = loop.create_task(_run_queued())
    _task.add_done_callback(_done)


async def _run_queued() -> None:
    global _last_recovery
    loop = asyncio.get_running_loop()
    if loop.time() - _last_recovery > RECOVER_EVERY_SECONDS:
        _last_recovery = loop.time()
        await recover()
    await drain()


async def stop() -> None:
    """Cancel the running job (its import rolls back: nothing applied; the job ends `failed`)."""
    if _task is not None and not _task.done() and _task.get_loop() is asyncio.get_running_loop():
        _task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await _task


def _done(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("dataset jobs failed: %s", type(task.exception()).__name__)
