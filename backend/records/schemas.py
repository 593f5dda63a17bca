"""What the records endpoints return. A record's fields depend on its dataset: `GET /api/records` lists each
dataset's fields and their types; a record maps those field names to values."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel

from backend.records.columns import ColumnKind

RecordValue = str | int | Decimal | bool | date | datetime | None  # Decimal (money) is sent as a string
Record = dict[str, RecordValue]


class DatasetInfo(BaseModel):
    name: str
    label: str
    access: Literal["read", "edit"] | None  # the caller's; None: no permission (the dataset is listed anyway)
    fields: list[str]  # in the order of the API rows and the CSV exports
    types: dict[str, ColumnKind]  # field -> the kind of value it holds (string, integer, number, date, …)
    origin: Literal["builtin", "company"] = "builtin"  # one of the twelve, or one the company defined
    key_column: str | None = None  # a company-defined dataset's external key (None for a built-in)
    writable: list[str] = []  # the fields a proposed change may set
    enums: dict[str, list[str]] = {}  # field -> its allowed values


class ColumnDefinition(BaseModel):
    """One column of a dataset definition."""

    name: str
    kind: ColumnKind
    nullable: bool = True
    max_length: int | None = None  # text columns; default 10,000
    enum: list[str] | None = None  # text columns: the allowed values


class DatasetBody(BaseModel):
    """A dataset definition as an admin sends it. With `template` (a built-in's name) and no `columns`, the
    built-in's columns, kinds, enums and writable columns are taken."""

    name: str
    label: str = ""
    columns: list[ColumnDefinition] = []
    key_column: str = ""
    writable: list[str] | None = None  # None: every column
    template: str | None = None


class DatasetDefinitionInfo(BaseModel):
    """A dataset's definition: a company-defined one (`origin` company), or a built-in offered as a template."""

    name: str
    label: str
    origin: Literal["builtin", "company"]
    columns: list[ColumnDefinition]
    key_column: str | None
    writable: list[str]
    template: str | None = None
    version: int = 1
    rows: int | None = None  # how many rows the company-defined dataset holds (every owner's)


class RecordPage(BaseModel):
    dataset: str
    items: list[Record]
    total: int
    page: int
    page_size: int


# imports and syncs (records/import_controller.py, records/jobs.py)


class RefusalInfo(BaseModel):
    row: int
    reason: str


class ImportReportInfo(BaseModel):
    """What an import (or a sync) did, or would do for a dry run: counts, and at most `refusals_listed`
    refusals listed (`refusals_not_listed` says how many more)."""

    dataset: str
    applied: bool
    rows_read: int
    added: int
    changed: int
    unchanged: int
    refused: int
    sha256: str
    refusals: list[RefusalInfo]
    refusals_listed: int
    refusals_not_listed: int
    ignored_columns: list[str]


class ColumnInfo(BaseModel):
    name: str
    kind: str
    nullable: bool
    max_length: int | None
    enum: list[str] | None


class PreviewInfo(BaseModel):
    kind: str
    header: list[str]
    columns: list[ColumnInfo]
    sampled_rows: int


class SourceInfo(BaseModel):
    dataset_id: int
    connection: str  # "set (hidden)" or "not set": never the connection string
    query: str
    table: str
    updated_at_column: str
    cursor: str
    cron: str
    timezone: str
    next_sync_at: datetime | None
    status: str
    last_error: str
    last_attempt_at: datetime | None
    last_synced_at: datetime | None
    last_summary: ImportReportInfo | None


class DatasetJobInfo(BaseModel):
    """An import or a sync running in the background: `state` queued | running | done | failed; `rows_read` so
    far (the final count once ended), `rows_total` when known (an earlier dry run of the same file); `report`
    once done (the import's report); `error` (and `error_code`) once failed: why, and nothing was applied."""

    id: int
    dataset: str
    kind: str  # import | sync
    dry_run: bool
    state: str
    started_by: str
    filename: str
    rows_read: int
    rows_total: int | None
    report: ImportReportInfo | None
    error: str
    error_code: str
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None


class SourceBody(BaseModel):
    connection: str | None = None  # postgresql://…; omitted: keep the stored one (never shown back)
    query: str = ""
    table: str = ""
    updated_at_column: str = ""
    cron: str = ""
    timezone: str = "UTC"
