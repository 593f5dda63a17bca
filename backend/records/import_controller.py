"""The API of imports and syncs (issue 54): a person's decisions, never the assistant's token (no ASSISTANT_OK:
the token guard answers 403 person_required), each checked again in the service (`ctx.require_person`).

An import and a sync run as background jobs (records/jobs.py): the request checks who and what, keeps the file
and answers 202 with the job; `GET /api/datasets/jobs/{id}` follows it to its report."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import IO, Annotated, Any

from litestar import Controller, get, post, put
from litestar.datastructures import UploadFile
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.params import Body
from pydantic import BaseModel

from backend.errors import Invalid, NotFound
from backend.hashing import StreamTooLong, copy_hashed
from backend.records import defined, importing, jobs, sync
from backend.records.schemas import DatasetJobInfo, PreviewInfo, SourceBody, SourceInfo
from backend.records.values import ColumnSpec
from backend.settings import get_settings
from backend.tenancy.auth import provide_user
from backend.tenancy.context import UserContext


class ImportForm(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    file: UploadFile
    dry_run: bool = True
    # a new dataset: its label, key column and columns (JSON: the preview's `columns`, as confirmed)
    label: str = ""
    key_column: str = ""
    columns: str = ""
    writable: str = ""  # JSON list; empty: every column


class PreviewForm(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    file: UploadFile


async def _spooled(upload: UploadFile) -> tuple[Path, str]:
    """The uploaded part copied to a private temporary file in chunks (the converter child reads it from there),
    and its sha256. Past `import_max_bytes`: 422 `too_large`, the partial copy removed."""
    limit = get_settings().import_max_bytes
    # every file system call in a thread: the event loop serves the other requests meanwhile
    handle = await asyncio.to_thread(_temporary_file, Path(get_settings().data_dir) / "tmp")
    path = Path(handle.name)
    try:
        with handle:
            sha256, _size = await asyncio.to_thread(copy_hashed, upload.file, handle, limit)
    except StreamTooLong as exc:
        await asyncio.to_thread(path.unlink, missing_ok=True)
        raise Invalid(
            f"the file is over the {limit / 2**20:,.0f} MiB import limit", code="too_large"
        ) from exc
    except BaseException:
        await asyncio.to_thread(path.unlink, missing_ok=True)
        raise
    return path, sha256


def _temporary_file(folder: Path) -> IO[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    return tempfile.NamedTemporaryFile(dir=folder, prefix="import-", delete=False)  # noqa: SIM115


def _new_spec(name: str, form: ImportForm) -> defined.DatasetSpec | None:
    if not form.columns:
        return None
    try:
        columns = [ColumnSpec.read(c) for c in json.loads(form.columns)]
        writable = json.loads(form.writable) if form.writable else None
    except (ValueError, KeyError, TypeError) as exc:
        raise Invalid(f"columns must be the preview's JSON list of columns ({exc})") from exc
    return defined.DatasetSpec(
        name=name, label=form.label or name, columns=columns, key_column=form.key_column, writable=writable
    )


async def _source_dataset(user: UserContext, name: str) -> Any:
    importing._require_importer(user, name)
    return await defined.get_defined(user.company_id, name)


class DatasetImportController(Controller):
    path = "/api/datasets"
    tags = ["datasets"]
    dependencies = {"user": Provide(provide_user)}

    @post("/import/preview", status_code=200)
    async def preview(
        self, user: UserContext, data: Annotated[PreviewForm, Body(media_type=RequestEncodingType.MULTI_PART)]
    ) -> PreviewInfo:
        """The file's columns and their inferred kinds, to confirm before a new dataset is defined from it."""
        user.require_person("importing a file")
        try:
            path, _sha256 = await _spooled(data.file)
        finally:
            await data.file.close()
        try:
            return PreviewInfo(**await importing.preview_file(user, path, data.file.filename))
        finally:
            path.unlink(missing_ok=True)

    # the body may be as large as an import may be (`import_max_bytes`, 512 MiB), not Drive's upload limit, which
    # the app sets for every other route: a 1,000,000-row CSV is ~110 MiB. It is spooled to disk in chunks.
    @post(
        "/{name:str}/import",
        status_code=202,
        request_max_body_size=get_settings().import_max_bytes + 1024 * 1024,
    )
    async def import_file(
        self,
        user: UserContext,
        name: str,
        data: Annotated[ImportForm, Body(media_type=RequestEncodingType.MULTI_PART)],
    ) -> DatasetJobInfo:
        """Start importing a CSV/XLSX/ODS file (`dry_run` true: only count what it would do) as a background
        job: 202 with the job; follow it at `GET /api/datasets/jobs/{id}`. With `columns`, the dataset is new
        and is defined (admin) when the import is applied. Who and what are checked now (403/404/409/422)."""
        user.require_person("importing into a dataset")
        spec = _new_spec(name, data)
        try:
            path, sha256 = await _spooled(data.file)
        finally:
            await data.file.close()
        try:
            job = await jobs.queue_import(
                user, name, path, data.file.filename or "", sha256, dry_run=data.dry_run, create=spec
            )
        finally:
            path.unlink(missing_ok=True)  # taken by the job (moved), or refused: never left behind
        return DatasetJobInfo(**job)

    @get("/jobs/{job_id:int}")
    async def job(self, user: UserContext, job_id: int) -> DatasetJobInfo:
        """An import or sync job: its state, rows read so far (of the total when known), its report or why it
        failed. To the person who started it and their company's admins; 404 to anyone else."""
        return DatasetJobInfo(**await jobs.get_job(user, job_id))

    @get("/{name:str}/source")
    async def source(self, user: UserContext, name: str) -> SourceInfo:
        """The dataset's sync source as its page shows it: status, last error, never the connection string."""
        dataset = await _source_dataset(user, name)
        try:
            return SourceInfo(**await sync.get_source(dataset))
        except LookupError as exc:
            raise NotFound(str(exc), code="no_source") from exc

    @put("/{name:str}/source")
    async def set_source(self, user: UserContext, name: str, data: SourceBody) -> SourceInfo:
        dataset = await _source_dataset(user, name)
        try:
            shown = await sync.set_source(
                dataset,
                owner_id=user.user_id,
                dsn=data.connection,
                query=data.query,
                table=data.table,
                updated_at_column=data.updated_at_column,
                cron=data.cron,
                timezone=data.timezone,
            )
        except ValueError as exc:
            raise Invalid(str(exc), code="invalid_source") from exc
        return SourceInfo(**shown)

    @post("/{name:str}/sync", status_code=202)
    async def sync_now(self, user: UserContext, name: str) -> DatasetJobInfo:
        """Sync now, as a background job (202 with the job). A failed sync ends the job `failed` with the
        reason; the last good data stays and the source shows it too."""
        return DatasetJobInfo(**await jobs.queue_sync(user, name))
