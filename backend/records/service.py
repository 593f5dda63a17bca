"""Reading records: paging and single records for the API and the CLI. All through the visibility rule
(`records.export` writes the capped CSV exports staging bundles)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from piccolo.columns.combination import And, WhereRaw
from piccolo.engine.postgres import PostgresEngine
from piccolo.querystring import QueryString

from backend.errors import Invalid, NotFound
from backend.records.columns import ColumnKind
from backend.records.datasets import SYSTEM_EXPORT_COLUMNS, AnyDataset
from backend.records.visibility import require_dataset, visible_record, visible_where
from backend.tenancy.context import UserContext

MAX_PAGE_SIZE = 500


def select_columns(dataset: AnyDataset) -> list[Any]:
    """What a row is read as: a built-in's columns, or a company-defined row's `values` (`dataset.decode`
    turns either into rows keyed by export column)."""
    table = dataset.table
    cols: list[Any] = [table.id]
    if dataset.builtin:
        cols += [getattr(table, name) for name in dataset.fields]
    else:
        cols.append(table.values)
    cols += [
        table.owner.as_alias("owner_id"),
        table.team.as_alias("team_id"),
        table.visibility,
        table.created_at,
        table.updated_at,
        table.version,
    ]
    return cols


def _parse_value(dataset: AnyDataset, field: str, raw: str) -> Any:
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


def _column(dataset: AnyDataset, field: str) -> Any:
    if field == "owner_id":
        return dataset.table.owner
    if field == "team_id":
        return dataset.table.team
    if not dataset.builtin and field not in SYSTEM_EXPORT_COLUMNS:
        return QueryString(_value_sql(dataset, field))
    return getattr(dataset.table, field)


def _value_sql(dataset: AnyDataset, field: str) -> str:
    """A company-defined column read out of the row's JSON, as its kind compares and sorts (numbers as
    numbers). Column names are checked identifiers (records/defined.py), so they are written inline."""
    kind = dataset.export_types[field]
    if isinstance(dataset.table._meta.db, PostgresEngine):
        text = f'("dataset_row"."values" ->> \'{field}\')'
        cast = {ColumnKind.integer: "NUMERIC", ColumnKind.number: "NUMERIC", ColumnKind.boolean: "BOOLEAN"}
        return f"CAST({text} AS {cast[kind]})" if kind in cast else text
    value = f'json_extract("dataset_row"."values", \'$.{field}\')'
    return f"CAST({value} AS REAL)" if kind in (ColumnKind.integer, ColumnKind.number) else value


def _filter_where(dataset: AnyDataset, field: str, value: Any) -> Any:
    if dataset.builtin or field in SYSTEM_EXPORT_COLUMNS:
        return _column(dataset, field) == value
    kind = dataset.export_types[field]
    if not isinstance(dataset.table._meta.db, PostgresEngine):
        if kind is ColumnKind.boolean:
            value = int(value)
        elif kind is ColumnKind.number:
            value = float(value)
        elif kind in (ColumnKind.date, ColumnKind.datetime):
            value = value.isoformat()
    elif kind in (ColumnKind.date, ColumnKind.datetime):
        value = value.isoformat()
    return WhereRaw(f"{_value_sql(dataset, field)} = {{}}", value)


def _filters_where(dataset: AnyDataset, filters: dict[str, str]) -> list[Any]:
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
        clauses.append(_filter_where(dataset, field, _parse_value(dataset, field, raw)))
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
    dataset = await require_dataset(ctx, dataset_name)
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
    return Page(dataset_name, dataset.decode(await query), total, page, page_size)


async def get_record(ctx: UserContext, dataset_name: str, record_id: int) -> dict[str, Any]:
    dataset = await require_dataset(ctx, dataset_name)
    row = await visible_record(ctx, dataset, record_id, *select_columns(dataset))
    if row is None:  # another company's row, an invisible row and a missing row look the same
        raise NotFound(f"no {dataset_name} record {record_id}")
    return dataset.decode([row])[0]
