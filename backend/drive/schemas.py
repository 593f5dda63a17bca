"""What the Drive endpoints accept and return. Pydantic only: the typed client imports this module, so the upload
form (a Litestar `UploadFile`) lives with the controller."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from backend.records.columns import VISIBILITIES


class FolderBody(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    parent_id: int | None = None
    visibility: str = Field(default="private", json_schema_extra={"enum": list(VISIBILITIES)})


class DriveFolderInfo(BaseModel):
    id: int
    name: str
    parent_id: int | None
    visibility: str
    run_id: int | None  # set for the folder holding a run's outputs
    source_datasets: list[str]  # a run's output: readable only with read on every one of these


class DriveFileInfo(BaseModel):
    id: int
    name: str
    size: int
    sha256: str
    kind: str  # sniffed from the content: xlsx, ods, csv, pdf, image, text, markdown, json, binary
    folder_id: int | None
    owner_id: int
    visibility: str
    run_id: int | None
    source_datasets: list[str]
    created_at: datetime
    trashed_at: datetime | None = None  # in the trash since then (only the trash listing shows these)
    purge_at: datetime | None = None  # purged then unless restored before


class VisibilityBody(BaseModel):
    visibility: str  # private (the owner), team or company


class DriveQuota(BaseModel):
    """What the caller and their company keep in Drive, the trash included, against the quotas."""

    user_used_bytes: int
    user_trash_bytes: int  # of user_used_bytes, in the trash (freed when purged)
    user_quota_bytes: int
    company_used_bytes: int
    company_quota_bytes: int
    trash_days: int  # how long a deleted file can be restored before it is purged
