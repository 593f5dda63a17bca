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


class RecordPage(BaseModel):
    dataset: str
    items: list[Record]
    total: int
    page: int
    page_size: int
