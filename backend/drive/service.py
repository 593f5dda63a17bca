"""Drive services: upload, list, download, folders, sharing, the trash. Visibility is the records' rule
(owned_rows_where); a file in the trash is seen by nobody but in the trash listing of its owner (and admins).

The trash: deleting a file moves it there (`trashed_at`); its owner (or a company admin) may restore it for
TRASH_DAYS, then it is purged: the row goes, and the blob with it when no other file holds that content.
A file in the trash still counts against the quotas until it is purged (deleting is undoable for 30 days,
so its bytes are still kept); purging it at once, from the trash, frees the room at once. Expired files are
purged on demand: before every quota check (an upload, the quota read), every trash listing or restore, and
by `cleanroom drive purge-trash` (for a daily timer)."""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO

from piccolo.columns.combination import And
from piccolo.query.functions.aggregate import Sum

from backend import clock
from backend.audit import service as audit
from backend.convert import TEXT_EXTENSIONS, ConversionFailed, sniff_kind
from backend.convert.model import ConvertLimits
from backend.convert.service import not_a_word_document
from backend.convert.sheets import open_zip_checked
from backend.convert.sniff import extension, mapped
from backend.credits.service import lock_company
from backend.drive import blobs
from backend.drive.tables import DriveFile, DriveFolder
from backend.errors import AppError, Conflict, Forbidden, Invalid, NotFound
from backend.hashing import StreamTooLong
from backend.records.tables import VISIBILITIES
from backend.records.visibility import owned_rows_where, visible_row
from backend.settings import get_settings
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Company

_BAD_NAME = re.compile(r"[\x00-\x1f/\\]")


class TooLarge(AppError):
    status_code = 413
    code = "file_too_large"


class QuotaExceeded(AppError):
    status_code = 413
    code = "drive_quota_exceeded"


class TooManyUploads(AppError):
    status_code = 429
    code = "too_many_uploads"


class UnreadableDocument(AppError):
    status_code = 422
    code = "unreadable_document"


class TrashExpired(AppError):
    status_code = 410
    code = "trash_expired"


UPLOAD_WINDOW = timedelta(hours=1)
TRASH_DAYS = 30
TRASH_KEPT = timedelta(days=TRASH_DAYS)
SYSTEM_ACTOR = "system"  # the purge of expired trash (data.reason: expired)
MB = 1024 * 1024
# blobs are shared by content across files and companies: a purge's "is this content still used?" and its
# unlink, and an upload's keep, row insert and commit, take this lock (per event loop, in this process), so a
# purge never removes a blob a new file has just come to share
_blob_locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or name in (".", "..") or _BAD_NAME.search(name) or len(name) > 255:
        raise Invalid(
            f"{name!r} is not a usable file name (no slashes or control characters, at most 255 chars)"
        )
    return name


def _check_visibility(visibility: str) -> str:
    if visibility not in VISIBILITIES:
        raise Invalid(f"visibility must be one of {list(VISIBILITIES)}")
    return visibility


def drive_kind(data: Any, name: str) -> str:
    """The kind the Drive shows, from the content (the name only tells text kinds apart). A file staging
    cannot convert is still stored, as "binary"; staging reports why it was not staged."""
    if extension(name) == ".docx":
        _check_word_document(data, name)
    try:
        kind = sniff_kind(data, name)
    except ConversionFailed:
        return "binary"
    if kind == "docx":
        _check_word_document(data, name)
    if kind != "text-like":
        return kind
    head = data[:8192]
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "binary"
    ext = "." + name.rsplit(".", 1)[1].lower() if "." in name.strip(".") else ""
    return TEXT_EXTENSIONS.get(ext, "text")


def _check_word_document(data: Any, name: str) -> None:
    """A Word document is kept only when the converter could read it: its type from its content, its
    container within the converter's zip limits (members, unpacked size, expansion ratio, no encryption),
    read from the central directory without inflating a byte. Else 422 and nothing is stored."""
    try:
        kind = sniff_kind(data, name)
        if kind != "docx":
            raise ConversionFailed(not_a_word_document(kind))
        open_zip_checked(data, ConvertLimits.from_settings(), "Word document").close()
    except ConversionFailed as exc:
        raise UnreadableDocument(f"{name} was not stored: {exc}") from None


def _team_for(ctx: UserContext) -> int | None:
    return min(ctx.team_ids) if ctx.team_ids else None


def file_payload(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "size": row["size"],
        "sha256": row["sha256"],
        "kind": row["kind"],
        "folder_id": row["folder"],
        "owner_id": row["owner"],
        "visibility": row["visibility"],
        "run_id": row["run_id"],
        "source_datasets": source_tags(row.get("source_datasets")),
        "created_at": row["created_at"],
        "trashed_at": row.get("trashed_at"),
        "purge_at": row["trashed_at"] + TRASH_KEPT if row.get("trashed_at") else None,
    }


def source_tags(value: Any) -> list[str]:
    """The datasets a run's output was computed from (stored as JSON text on SQLite)."""
    if isinstance(value, str):
        value = json.loads(value or "[]")
    return sorted(value or [])


async def create_folder(
    ctx: UserContext,
    name: str,
    *,
    parent_id: int | None = None,
    visibility: str = "private",
    run_id: int | None = None,
    source_datasets: list[str] | None = None,
) -> dict[str, Any]:
    """`source_datasets`: for a run's output folder, the datasets the run read (see owned_rows_where)."""
    name = _check_name(name)
    if parent_id is not None:
        await get_folder(ctx, parent_id)
    now = clock.now()
    folder = DriveFolder(
        company=ctx.company_id,
        owner=ctx.user_id,
        team=_team_for(ctx),
        visibility=_check_visibility(visibility),
        created_at=now,
        updated_at=now,
        name=name,
        parent_id=parent_id,
        run_id=run_id,
        source_datasets=sorted(set(source_datasets or [])),
    )
    await folder.save()
    return {
        "id": folder.id,
        "name": name,
        "parent_id": parent_id,
        "visibility": visibility,
        "run_id": run_id,
        "source_datasets": sorted(set(source_datasets or [])),
    }


async def get_folder(ctx: UserContext, folder_id: int) -> dict[str, Any]:
    row = await visible_row(ctx, DriveFolder, folder_id)
    if row is None:
        raise NotFound(f"no folder {folder_id}")
    return row


async def list_folders(ctx: UserContext, parent_id: int | None = None) -> list[dict[str, Any]]:
    query = DriveFolder.select().where(owned_rows_where(ctx, DriveFolder))
    query = query.where(
        DriveFolder.parent_id.is_null() if parent_id is None else DriveFolder.parent_id == parent_id
    )
    return [
        {
            "id": r["id"],
            "name": r["name"],
            "parent_id": r["parent_id"],
            "visibility": r["visibility"],
            "run_id": r["run_id"],
            "source_datasets": source_tags(r["source_datasets"]),
        }
        for r in await query.order_by(DriveFolder.name)
    ]


async def upload(
    ctx: UserContext,
    name: str,
    data: bytes | BinaryIO,
    *,
    folder_id: int | None = None,
    visibility: str = "private",
    run_id: int | None = None,
    audit_actor: str | None = None,
    source_datasets: list[str] | None = None,
    folder_checked: bool = False,
) -> dict[str, Any]:
    """File `data` (bytes, or a binary stream copied to disk in chunks, never whole in memory).
    `folder_checked`: the caller made (or read) `folder_id` as `ctx` in this request, so it is not read
    again here to check that `ctx` sees it (a run's outputs, filed into the folder made for them).

    A person's upload (no `run_id`) counts against the company's Drive quotas and upload rate: 429 past
    the files per hour, 413 past the bytes a person or the company may keep. A run's outputs are bounded
    by the run's own output limits instead. `source_datasets`: for a run's output, the datasets it was
    computed from; only people who may read every one of them (and admins) see the file."""
    limit = get_settings().max_upload_bytes
    name = _check_name(name)
    _check_visibility(visibility)
    if folder_id is not None and not folder_checked:
        await get_folder(ctx, folder_id)
    person = run_id is None
    if person:
        await _check_upload_rate(ctx)
        await purge_expired(ctx.company_id)  # before counting, and outside the filing transaction
        await _check_quota(ctx, 0)  # already full: refused before reading a byte
    size = len(data) if isinstance(data, bytes) else _stream_size(data)
    if size is not None and size > limit:
        raise TooLarge(f"{name} is {size:,} bytes; the limit per file is {limit:,} bytes")
    if isinstance(data, bytes):
        received = await asyncio.to_thread(blobs.receive_bytes, data)
    else:
        try:
            # hashing, writing up to max_upload_bytes and sniffing the content are blocking work
            received = await asyncio.to_thread(blobs.receive, data, limit)
        except StreamTooLong:
            raise TooLarge(f"{name} is over the limit per file of {limit:,} bytes") from None
    try:
        kind = await asyncio.to_thread(_kind_of_file, received.path, name)

        async def file_it() -> DriveFile:
            digest = await asyncio.to_thread(blobs.keep, received)
            row = await _file_row(
                ctx, name, digest, received.size, kind, folder_id, visibility, run_id, source_datasets
            )
            named = {"name": name, "sha256": digest}
            await audit.record(
                "drive.uploaded",
                actor=audit_actor or ctx.actor,
                company_id=ctx.company_id,
                subject_type="drive_file",
                subject_id=row.id,
                data={
                    # a run's output: its name and hash are what the run's code chose and made, the run's
                    # contents (audit CONTENT_KEYS), shown as the run's outputs are
                    **(named if run_id is None else {"run_id": run_id, "outputs": [named]}),
                    "size": received.size,
                    "folder_id": folder_id,
                    **({"source_datasets": sorted(set(source_datasets))} if source_datasets else {}),
                },
            )
            return row

        if person:
            # the check and the insert, and the entry, in one transaction holding the company's row: a second
            # upload of the company, in this process or any other, waits and then counts this one
            async with _blob_lock(), audit.atomic():
                await lock_company(ctx.company_id)
                await _check_upload_rate(ctx)
                await _check_quota(ctx, received.size)
                row = await file_it()
        else:
            async with _blob_lock():
                row = await file_it()
    finally:
        await asyncio.to_thread(blobs.discard, received)  # a no-op once kept
    return file_payload(await DriveFile.select().where(DriveFile.id == row.id).first())


def _stream_size(stream: BinaryIO) -> int | None:
    """The bytes left in a seekable stream (the multipart parser's spooled file), without reading them."""
    try:
        here = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(here)
    except (OSError, AttributeError, ValueError):
        return None
    return end - here


def _kind_of_file(path: Path, name: str) -> str:
    with mapped(path) as content:
        return drive_kind(content, name)


async def _file_row(
    ctx: UserContext,
    name: str,
    digest: str,
    size: int,
    kind: str,
    folder_id: int | None,
    visibility: str,
    run_id: int | None,
    source_datasets: list[str] | None,
) -> DriveFile:
    now = clock.now()
    row = DriveFile(
        company=ctx.company_id,
        owner=ctx.user_id,
        team=_team_for(ctx),
        visibility=visibility,
        created_at=now,
        updated_at=now,
        folder=folder_id,
        name=name,
        size=size,
        sha256=digest,
        kind=kind,
        run_id=run_id,
        source_datasets=sorted(set(source_datasets or [])),
    )
    await row.save()
    return row


def _blob_lock() -> asyncio.Lock:
    key = id(asyncio.get_running_loop())
    lock = _blob_locks.get(key)
    if lock is None:
        lock = _blob_locks[key] = asyncio.Lock()
    return lock


async def _limits(company_id: int) -> dict[str, int]:
    row = (
        await Company.select(
            Company.drive_quota_mb_per_user,
            Company.drive_quota_mb_per_company,
            Company.drive_uploads_per_hour,
        )
        .where(Company.id == company_id)
        .first()
    )
    assert row is not None
    return row


async def _used(where: Any) -> int:
    row = await DriveFile.select(Sum(DriveFile.size)).where(where).first()
    return int((row or {}).get("sum") or 0)


async def _check_quota(ctx: UserContext, incoming: int) -> None:
    """The person's files and the company's (the trash included), with `incoming` added, within the
    company's quotas. (An upload purges the company's expired trash first, outside its transaction.)"""
    limits = await _limits(ctx.company_id)
    for scope, where, quota_mb in (
        (
            "you",
            (DriveFile.company == ctx.company_id) & (DriveFile.owner == ctx.user_id),
            limits["drive_quota_mb_per_user"],
        ),
        ("your company", DriveFile.company == ctx.company_id, limits["drive_quota_mb_per_company"]),
    ):
        used, quota = await _used(where), quota_mb * MB
        if used + incoming > quota or (incoming == 0 and used >= quota):
            raise QuotaExceeded(
                {
                    "message": f"{scope} keep {used / MB:,.1f} MB in Drive"
                    + (f" and this file adds {incoming / MB:,.1f} MB" if incoming else "")
                    + f"; the quota is {quota_mb:,} MB. Delete files you no longer need, or ask a company "
                    "admin to raise the quota in the company settings",
                    "scope": "user" if scope == "you" else "company",
                    "used_bytes": used,
                    "quota_bytes": quota,
                }
            )


async def _check_upload_rate(ctx: UserContext) -> None:
    limit = (await _limits(ctx.company_id))["drive_uploads_per_hour"]
    since = clock.now() - UPLOAD_WINDOW
    recent = await DriveFile.count().where(
        (DriveFile.company == ctx.company_id)
        & (DriveFile.owner == ctx.user_id)
        & (DriveFile.run_id.is_null())
        & (DriveFile.created_at >= since)
    )
    if recent >= limit:
        raise TooManyUploads(
            {
                "message": f"you uploaded {recent} files in the last hour; the limit is {limit} per person "
                "per hour. Wait before uploading more",
                "limit": limit,
                "window_seconds": int(UPLOAD_WINDOW.total_seconds()),
            }
        )


async def get_file(ctx: UserContext, file_id: int) -> dict[str, Any]:
    row = await visible_row(ctx, DriveFile, file_id)
    if row is None or row["trashed_at"] is not None:
        # another company's file, an unshared file, a file in the trash and a missing file look the same
        raise NotFound(f"no Drive file {file_id}")
    return row


async def read_file(ctx: UserContext, file_id: int) -> tuple[dict[str, Any], bytes]:
    row = await get_file(ctx, file_id)
    return row, await asyncio.to_thread(blobs.get, row["sha256"])


async def list_files(
    ctx: UserContext, *, folder_id: int | None = None, run_id: int | None = None, all_folders: bool = False
) -> list[dict[str, Any]]:
    query = DriveFile.select().where(owned_rows_where(ctx, DriveFile), DriveFile.trashed_at.is_null())
    if run_id is not None:
        query = query.where(DriveFile.run_id == run_id)
    elif not all_folders:
        query = query.where(
            DriveFile.folder.is_null() if folder_id is None else DriveFile.folder == folder_id
        )
    return [file_payload(r) for r in await query.order_by(DriveFile.name)]


async def find_file_by_name(ctx: UserContext, name: str) -> dict[str, Any]:
    row = (
        await DriveFile.select()
        .where(And(owned_rows_where(ctx, DriveFile), DriveFile.name == name), DriveFile.trashed_at.is_null())
        .first()
    )
    if row is None:
        raise NotFound(f"no Drive file named {name!r}")
    return row


# --- sharing and the trash --------------------------------------------------------------------------------


async def _changeable(ctx: UserContext, file_id: int, what: str, *, trashed: bool) -> dict[str, Any]:
    """The file `ctx` may change: one it sees (another company's is a 404 like a missing one), in the trash
    or not as `trashed` says, that it owns, or any of the company's when `ctx` is an admin (an admin runs
    the company's Drive: a person who left still holds quota). A person's decision: never a token's."""
    ctx.require_person(what)
    row = await visible_row(ctx, DriveFile, file_id)
    if row is None or (row["trashed_at"] is not None) != trashed:
        where = "in the trash" if trashed else "in Drive"
        raise NotFound(f"no Drive file {file_id} {where}")
    if row["owner"] != ctx.user_id and not ctx.is_admin:
        raise Forbidden(f"{what} is for the file's owner (or a company admin)", code="not_owner")
    if row["run_id"] is not None:
        raise Conflict(f"file {file_id} is an output of run {row['run_id']}: it is kept with the run")
    return row


def _audit_data(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": row["name"],
        "size": row["size"],
        "sha256": row["sha256"],
        "owner_id": row["owner"],
        **extra,
    }


async def set_visibility(ctx: UserContext, file_id: int, visibility: str) -> dict[str, Any]:
    """Who sees the file: its owner only (private), its team, or the company."""
    _check_visibility(visibility)
    row = await _changeable(ctx, file_id, "changing who sees a file", trashed=False)
    if row["visibility"] != visibility:
        await DriveFile.update(
            {
                DriveFile.visibility: visibility,
                DriveFile.updated_at: clock.now(),
                DriveFile.version: DriveFile.version + 1,
            }
        ).where(DriveFile.id == file_id)
        await audit.record(
            "drive.visibility_changed",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="drive_file",
            subject_id=file_id,
            data=_audit_data(row, before=row["visibility"], after=visibility, **ctx.via()),
        )
    return file_payload(await DriveFile.select().where(DriveFile.id == file_id).first())


async def trash(ctx: UserContext, file_id: int) -> dict[str, Any]:
    """Move a file to the trash: gone from Drive, listings and staging; restorable for TRASH_DAYS."""
    row = await _changeable(ctx, file_id, "deleting a file", trashed=False)
    now = clock.now()
    await DriveFile.update({DriveFile.trashed_at: now, DriveFile.updated_at: now}).where(
        DriveFile.id == file_id
    )
    await audit.record(
        "drive.trashed",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="drive_file",
        subject_id=file_id,
        data=_audit_data(row, purge_at=(now + TRASH_KEPT).isoformat(), **ctx.via()),
    )
    return file_payload(await DriveFile.select().where(DriveFile.id == file_id).first())


async def list_trash(ctx: UserContext) -> list[dict[str, Any]]:
    """The caller's files in the trash (an admin: the company's), newest first; expired ones purged first."""
    await purge_expired(ctx.company_id)
    query = DriveFile.select().where(DriveFile.company == ctx.company_id, DriveFile.trashed_at.is_not_null())
    if not ctx.is_admin:
        query = query.where(DriveFile.owner == ctx.user_id)
    return [file_payload(r) for r in await query.order_by(DriveFile.trashed_at, ascending=False)]


async def restore(ctx: UserContext, file_id: int) -> dict[str, Any]:
    """Back from the trash, within TRASH_DAYS; past that the file is purged (410 trash_expired)."""
    row = await _changeable(ctx, file_id, "restoring a file", trashed=True)
    if clock.now() - row["trashed_at"] >= TRASH_KEPT:
        await _purge_row(row, actor=SYSTEM_ACTOR, reason="expired")
        raise TrashExpired(
            f"{row['name']} was deleted more than {TRASH_DAYS} days ago and has been purged; it cannot be "
            "restored"
        )
    await DriveFile.update({DriveFile.trashed_at: None, DriveFile.updated_at: clock.now()}).where(
        DriveFile.id == file_id
    )
    await audit.record(
        "drive.restored",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="drive_file",
        subject_id=file_id,
        data=_audit_data(row, **ctx.via()),
    )
    return file_payload(await DriveFile.select().where(DriveFile.id == file_id).first())


async def purge(ctx: UserContext, file_id: int) -> None:
    """Remove a file in the trash for good now (its bytes stop counting against the quotas)."""
    row = await _changeable(ctx, file_id, "purging a file", trashed=True)
    await _purge_row(row, actor=ctx.actor, reason="purged", via=ctx.via())


async def purge_expired(company_id: int | None = None) -> int:
    """Purge every file that has been in the trash for TRASH_DAYS (one company's, or all): how many."""
    query = DriveFile.select().where(DriveFile.trashed_at <= clock.now() - TRASH_KEPT)
    if company_id is not None:
        query = query.where(DriveFile.company == company_id)
    rows = await query
    for row in rows:
        await _purge_row(row, actor=SYSTEM_ACTOR, reason="expired")
    return len(rows)


async def _purge_row(row: dict[str, Any], *, actor: str, reason: str, via: dict | None = None) -> None:
    async with _blob_lock():
        deleted = (
            await DriveFile.delete()
            .where(DriveFile.id == row["id"], DriveFile.trashed_at.is_not_null())
            .returning(DriveFile.id)
        )
        if not deleted:  # purged meanwhile (by another request): nothing to free or to audit
            return
        still_used = await DriveFile.exists().where(DriveFile.sha256 == row["sha256"])
        if not still_used:
            await asyncio.to_thread(blobs.remove, row["sha256"])
    await audit.record(
        "drive.purged",
        actor=actor,
        company_id=row["company"],
        subject_type="drive_file",
        subject_id=row["id"],
        data=_audit_data(row, reason=reason, blob_removed=not still_used, **(via or {})),
    )


async def quota(ctx: UserContext) -> dict[str, Any]:
    """What the person and the company keep in Drive (the trash included) against their quotas."""
    await purge_expired(ctx.company_id)
    limits = await _limits(ctx.company_id)
    mine = (DriveFile.company == ctx.company_id) & (DriveFile.owner == ctx.user_id)
    return {
        "user_used_bytes": await _used(mine),
        "user_trash_bytes": await _used(mine & DriveFile.trashed_at.is_not_null()),
        "user_quota_bytes": limits["drive_quota_mb_per_user"] * MB,
        "company_used_bytes": await _used(DriveFile.company == ctx.company_id),
        "company_quota_bytes": limits["drive_quota_mb_per_company"] * MB,
        "trash_days": TRASH_DAYS,
    }
