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
