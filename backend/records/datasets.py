"""The dataset registry: names, tables, enums and which fields a proposed change may touch."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    name: str
    table: type[Table]
    label: str
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)

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

DATASET_NAMES = tuple(DATASETS)

# Fields holding the id of another record, and the dataset that record lives in. A proposed change may set
# one only to a record of the same company (checked when the item is made and again when it is accepted).
REFERENCES: dict[str, str] = {
    "account_id": "accounts",
    "deal_id": "deals",
    "related_deal_id": "deals",
}
