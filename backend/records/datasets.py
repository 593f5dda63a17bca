"""The dataset registry: names, tables, enums and which fields a proposed change may touch."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from piccolo.columns import (
    Boolean,
    Column,
    Date,
    ForeignKey,
    Integer,
    Numeric,
    Real,
    Serial,
    Text,
    Timestamp,
    Timestamptz,
    Varchar,
)
from piccolo.table import Table

from backend.records import tables as t
from backend.records.columns import ColumnKind
from backend.records.names import DATASET_NAMES
from backend.records.values import TEXT_MAX, ColumnSpec, from_json

# Piccolo's column classes → the kind of value; subclasses follow their base (SmallInt and BigInt are
# Integers, Decimal is a Numeric, DoublePrecision and Float are Reals).
KINDS: dict[type[Column], ColumnKind] = {
    Varchar: ColumnKind.string,
    Text: ColumnKind.string,
    Serial: ColumnKind.integer,
    Integer: ColumnKind.integer,
    ForeignKey: ColumnKind.integer,  # the referenced row's id
    Numeric: ColumnKind.number,
    Real: ColumnKind.number,
    Boolean: ColumnKind.boolean,
    Date: ColumnKind.date,
    Timestamp: ColumnKind.datetime,
    Timestamptz: ColumnKind.datetime,
}


def kind_of(column: Column) -> ColumnKind:
    """The kind of value `column` holds; TypeError for a column class no kind names (add it to KINDS)."""
    for cls in type(column).__mro__:
        if cls in KINDS:
            return KINDS[cls]
    raise TypeError(f"no ColumnKind for Piccolo's {type(column).__name__} columns")


SYSTEM_FIELDS = ("id", "company", "owner", "team", "visibility", "created_at", "updated_at", "version")


@dataclass(frozen=True)
class Dataset:
    """A built-in dataset: one Piccolo table of its own (records/tables.py)."""

    name: str
    table: type[Table]
    label: str
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)

    builtin = True
    id = None  # a company-defined dataset's definition id; built-ins have none

    def scope(self) -> Any:
        """What narrows `table` to this dataset's rows beyond the visibility rule: nothing for a built-in."""
        return None

    def spec(self, name: str) -> ColumnSpec:
        column = getattr(self.table, name)
        kind = kind_of(column)
        length = getattr(column, "length", None) if kind is ColumnKind.string else None
        return ColumnSpec(name, kind, bool(column._meta.null), length, self.enums.get(name))

    @property
    def specs(self) -> list[ColumnSpec]:
        return [self.spec(name) for name in self.fields]

    def decode(self, rows: Any, *, typed: bool = True) -> Any:
        """Rows as read by `select_columns`, as the API shows them: a built-in's are already so."""
        return rows

    @property
    def fields(self) -> list[str]:
        return [c._meta.name for c in self.table._meta.columns if c._meta.name not in SYSTEM_FIELDS]

    @property
    def writable_fields(self) -> list[str]:
        return self.fields

    @property
    def export_columns(self) -> list[str]:
        """Column order of the API rows and the CSV exports."""
        return [
            "id",
            *self.fields,
            "owner_id",
            "team_id",
            "visibility",
            "created_at",
            "updated_at",
            "version",
        ]

    @property
    def column_types(self) -> dict[str, ColumnKind]:
        return {c._meta.name: kind_of(c) for c in self.table._meta.columns}

    @property
    def export_types(self) -> dict[str, ColumnKind]:
        """The kind of each export column; `owner_id`/`team_id` are their foreign keys (integers)."""
        types = self.column_types
        return {
            c: types.get(c, types.get(c.removesuffix("_id"), ColumnKind.string)) for c in self.export_columns
        }


SYSTEM_EXPORT_COLUMNS = ("id", "owner_id", "team_id", "visibility", "created_at", "updated_at", "version")


@dataclass(frozen=True)
class DefinedDataset:
    """A dataset a company defined (records/defined.py). Its rows are `DatasetRow`s with `dataset` = `id`: the
    same system columns as a built-in table's, so `records.visibility` reads both with one rule; its own
    columns are the keys of each row's `values`. Same properties as `Dataset`, so the records API, exports,
    staging and proposed changes read both alike."""

    id: int
    company_id: int
    name: str
    label: str
    columns: tuple[ColumnSpec, ...]
    key_column: str
    writable: tuple[str, ...]
    template: str = ""
    version: int = 1

    builtin = False

    @property
    def table(self) -> type[Table]:
        return t.DatasetRow

    def scope(self) -> Any:
        return t.DatasetRow.dataset == self.id

    @cached_property
    def _specs(self) -> dict[str, ColumnSpec]:
        return {c.name: c for c in self.columns}

    def spec(self, name: str) -> ColumnSpec:
        return self._specs[name]

    @property
    def specs(self) -> list[ColumnSpec]:
        return list(self.columns)

    @property
    def enums(self) -> dict[str, tuple[str, ...]]:
        return {c.name: c.enum for c in self.columns if c.enum}

    @property
    def fields(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def writable_fields(self) -> list[str]:
        return list(self.writable)

    @property
    def export_columns(self) -> list[str]:
        return ["id", *self.fields, *SYSTEM_EXPORT_COLUMNS[1:]]

    @property
    def column_types(self) -> dict[str, ColumnKind]:
        return {c.name: c.kind for c in self.columns}

    @property
    def export_types(self) -> dict[str, ColumnKind]:
        system = {
            "id": ColumnKind.integer,
            "owner_id": ColumnKind.integer,
            "team_id": ColumnKind.integer,
            "visibility": ColumnKind.string,
            "created_at": ColumnKind.datetime,
            "updated_at": ColumnKind.datetime,
            "version": ColumnKind.integer,
        }
        return {c: system[c] if c in system else self.column_types[c] for c in self.export_columns}

    def decode(self, rows: Any, *, typed: bool = True) -> list[dict[str, Any]]:
        """Rows read as `id, values, owner_id, team_id, visibility, created_at, updated_at, version` → rows
        keyed by export column, each value the Python type a built-in column of its kind reads as (text,
        whole numbers and booleans are stored as such; only numbers, dates and datetimes are converted).

        `typed=False` (the CSV export): numbers, dates and datetimes stay the canonical text they are stored
        as, which is exactly what the CSV writes for the typed values (str(Decimal), isoformat())."""
        plain = [c.name for c in self.columns if not typed or c.kind in _STORED_AS_IS]
        converted = (
            [] if not typed else [(c.name, c.kind) for c in self.columns if c.kind not in _STORED_AS_IS]
        )
        raws = [row["values"] for row in rows]
        if all(isinstance(raw, str) for raw in raws):  # one parse of all the rows: a C call, not one per row
            parsed = json.loads("[" + ",".join(raws) + "]") if raws else []
        else:
            parsed = [json.loads(raw) if isinstance(raw, str | bytes) else (raw or {}) for raw in raws]
        system = SYSTEM_EXPORT_COLUMNS[1:]
        out = []
        for row, values in zip(rows, parsed, strict=True):
            get = values.get
            item: dict[str, Any] = {"id": row["id"]}
            for name in plain:
                item[name] = get(name)
            for name, kind in converted:
                value = get(name)
                item[name] = None if value is None else from_json(kind, value)
            for name in system:
                item[name] = row[name]
            out.append(item)
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> DefinedDataset:
        columns = row["columns"]
        writable = row["writable"]
        columns = json.loads(columns) if isinstance(columns, str) else columns
        writable = json.loads(writable) if isinstance(writable, str) else writable
        return cls(
            id=row["id"],
            company_id=row["company"],
            name=row["name"],
            label=row["label"],
            columns=tuple(ColumnSpec.read(c) for c in columns),
            key_column=row["key_column"],
            writable=tuple(writable),
            template=row.get("template") or "",
            version=row.get("version") or 1,
        )


AnyDataset = Dataset | DefinedDataset
_STORED_AS_IS = (ColumnKind.string, ColumnKind.integer, ColumnKind.boolean)


def template_specs(dataset: Dataset) -> list[ColumnSpec]:
    """A built-in's columns as a company-defined dataset starts from them (`datasets create --template`):
    the same kinds, enums and emptiness; text as long as the built-in's, or TEXT_MAX for unbounded text."""
    return [
        ColumnSpec(
            s.name,
            s.kind,
            s.nullable,
            (s.max_length or TEXT_MAX) if s.kind is ColumnKind.string else None,
            s.enum,
        )
        for s in dataset.specs
    ]


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        Dataset(
            "contacts",
            t.Contact,
            "Contacts",
            {"lifecycle_stage": ("lead", "prospect", "customer", "churned")},
        ),
        Dataset(
            "accounts",
            t.Account,
            "Accounts",
            {"tier": ("smb", "mid_market", "enterprise"), "status": ("prospect", "active", "churned")},
        ),
        Dataset(
            "deals",
            t.Deal,
            "Deals",
            {"stage": ("prospecting", "qualification", "proposal", "negotiation", "won", "lost")},
        ),
        Dataset(
            "quotes", t.Quote, "Quotes", {"status": ("draft", "sent", "accepted", "declined", "expired")}
        ),
        Dataset("invoices", t.Invoice, "Invoices", {"status": ("draft", "sent", "paid", "overdue", "void")}),
        Dataset(
            "tasks",
            t.Task,
            "Tasks",
            {
                "status": ("open", "in_progress", "done", "cancelled"),
                "priority": ("low", "normal", "high", "urgent"),
            },
        ),
        Dataset(
            "expenses",
            t.Expense,
            "Expenses",
            {
                "category": ("travel", "meals", "software", "hardware", "office", "training"),
                "status": ("submitted", "approved", "rejected", "reimbursed"),
            },
        ),
        Dataset(
            "employees",
            t.Employee,
            "Employees",
            {
                "employment_type": ("full_time", "part_time", "contractor"),
                "status": ("active", "leave", "terminated"),
            },
        ),
        Dataset(
            "calendar_events",
            t.CalendarEvent,
            "Calendar events",
            {"event_type": ("meeting", "call", "demo", "internal")},
        ),
        Dataset(
            "signing_envelopes",
            t.SigningEnvelope,
            "Signing envelopes",
            {"status": ("draft", "sent", "viewed", "signed", "declined", "voided")},
        ),
        Dataset(
            "inventory_items",
            t.InventoryItem,
            "Inventory items",
            {"status": ("in_stock", "low", "out_of_stock", "discontinued")},
        ),
        Dataset("products", t.Product, "Products"),
    ]
}

if tuple(DATASETS) != DATASET_NAMES:  # the Piccolo-free list (records/names.py) names the same, in this order
    raise RuntimeError(
        f"backend/records/names.py lists {DATASET_NAMES}, the definitions here {tuple(DATASETS)}"
    )

# Fields holding the id of another record, and the dataset that record lives in. A proposed change may set
# one only to a record of the same company (checked when the item is made and again when it is accepted).
REFERENCES: dict[str, str] = {
    "account_id": "accounts",
    "deal_id": "deals",
    "related_deal_id": "deals",
}
