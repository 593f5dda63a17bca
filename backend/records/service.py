"""Reading records: paging and single records for the API and the CLI. All through the visibility rule
(`records.export` writes the capped CSV exports staging bundles)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from piccolo.columns.combination import And

from backend.errors import Invalid, NotFound
from backend.records.columns import ColumnKind
from backend.records.datasets import Dataset
from backend.records.visibility import require_dataset, visible_row, visible_where
from backend.tenancy.context import UserContext

MAX_PAGE_SIZE = 500


def select_columns(dataset: Dataset) -> list[Any]:
    table = dataset.table
    cols: list[Any] = [table.id]
    cols += [getattr(table, name) for name in dataset.fields]
    cols += [
        table.owner.as_alias("owner_id"),
        table.team.as_alias("team_id"),
        table.visibility,
        table.created_at,
        table.updated_at,
        table.version,
    ]
    return cols


def _parse_value(dataset: Dataset, field: str, raw: str) -> Any:
    kind = dataset.export_types.get(field)
    try:
        if kind is ColumnKind.integer:
            return int(raw)
        if kind is ColumnKind.boolean:
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return raw.lower() in ("true", "1")
        if kind is ColumnKind.number:
            return Decimal(raw)
        if kind is ColumnKind.date:
            return dt.date.fromisoformat(raw)
        if kind is ColumnKind.datetime:
            return dt.datetime.fromisoformat(raw)
    except (ValueError, InvalidOperation) as exc:
        raise Invalid(
            {"message": f"filter {field}={raw!r} is not a valid {kind}", "parameter": f"filter.{field}"}
        ) from exc
    return raw


def _column(dataset: Dataset, field: str) -> Any:
    if field == "owner_id":
        return dataset.table.owner
    if field == "team_id":
        return dataset.table.team
    return getattr(dataset.table, field)


def _filters_where(dataset: Dataset, filters: dict[str, str]) -> list[Any]:
    clauses = []
    for field, raw in filters.items():
        if field not in dataset.export_columns:
            raise Invalid(
                {
                    "message": f"cannot filter {dataset.name} by {field!r}",
                    "parameter": f"filter.{field}",
                    "valid_fields": dataset.export_columns,
                }
            )
        clauses.append(_column(dataset, field) == _parse_value(dataset, field, raw))
    return clauses


@dataclass
class Page:
    dataset: str
    items: list[dict[str, Any]]
    total: int
    page: int
    page_size: int


async def list_records(
    ctx: UserContext,
    dataset_name: str,
    *,
    page: int = 1,
    page_size: int = 50,
    sort: str = "id",
    filters: dict[str, str] | None = None,
) -> Page:
    dataset = require_dataset(ctx, dataset_name)
    if page < 1:
        raise Invalid({"message": "page must be 1 or more", "parameter": "page"})
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise Invalid(
            {"message": f"page_size must be between 1 and {MAX_PAGE_SIZE}", "parameter": "page_size"}
        )
    descending = sort.startswith("-")
    sort_field = sort.lstrip("-")
    if sort_field not in dataset.export_columns:
        raise Invalid(
            {
                "message": f"cannot sort by {sort_field!r}",
                "parameter": "sort",
                "valid_fields": dataset.export_columns,
            }
        )
    where = (
        And(visible_where(ctx, dataset), *_filters_where(dataset, filters or {}))
        if filters
        else visible_where(ctx, dataset)
    )
    table = dataset.table
    total = await table.count().where(where)
    query = (
        table.select(*select_columns(dataset))
        .where(where)
        .order_by(_column(dataset, sort_field), ascending=not descending)
        .limit(page_size)
        .offset((page - 1) * page_size)
    )
    if sort_field != "id":
        query = query.order_by(table.id)
    return Page(dataset_name, await query, total, page, page_size)


async def get_record(ctx: UserContext, dataset_name: str, record_id: int) -> dict[str, Any]:
    dataset = require_dataset(ctx, dataset_name)
    row = await visible_row(ctx, dataset.table, record_id, *select_columns(dataset))
    if row is None:  # another company's row, an invisible row and a missing row look the same
        raise NotFound(f"no {dataset_name} record {record_id}")
    return row
