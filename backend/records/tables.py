"""The twelve business datasets. Every row has an owner, a team, a visibility and a version."""

from __future__ import annotations

from piccolo.columns import (
    JSON,
    JSONB,
    BigInt,
    Boolean,
    Date,
    ForeignKey,
    Integer,
    Numeric,
    Text,
    Timestamptz,
    Varchar,
)
from piccolo.table import Table

from backend.records.columns import VISIBILITIES as VISIBILITIES  # where its readers have always found it
from backend.tenancy.tables import Company, Team, User


class RecordColumns:
    company = ForeignKey(references=Company, null=False, index=True)
    owner = ForeignKey(references=User, null=False, index=True)
    team = ForeignKey(references=Team, null=True, default=None, index=True)
    visibility = Varchar(length=10, default="company", index=True)
    created_at = Timestamptz()
    updated_at = Timestamptz()
    version = Integer(default=1)


def money() -> Numeric:
    return Numeric(digits=(14, 2))


class Contact(RecordColumns, Table):
    first_name = Varchar(length=100)
    last_name = Varchar(length=100)
    email = Varchar(length=254)
    phone = Varchar(length=40)
    title = Varchar(length=120)
    account_id = BigInt(null=True, default=None)
    city = Varchar(length=100)
    country = Varchar(length=2)
    lifecycle_stage = Varchar(length=20)
    notes = Text(default="")


class Account(RecordColumns, Table):
    name = Varchar(length=200)
    industry = Varchar(length=60)
    website = Varchar(length=200)
    country = Varchar(length=2)
    annual_revenue = money()
    currency = Varchar(length=3, default="EUR")
    employee_count = Integer(default=0)
    tier = Varchar(length=20)
    status = Varchar(length=20)
    notes = Text(default="")


class Deal(RecordColumns, Table):
    name = Varchar(length=200)
    account_id = BigInt(null=True, default=None)
    stage = Varchar(length=20)
    amount = money()
    currency = Varchar(length=3, default="EUR")
    probability = Integer(default=10)
    close_date = Date(null=True, default=None)
    source = Varchar(length=40)
    notes = Text(default="")


class Quote(RecordColumns, Table):
    number = Varchar(length=30)
    deal_id = BigInt(null=True, default=None)
    account_id = BigInt(null=True, default=None)
    status = Varchar(length=20)
    amount = money()
    currency = Varchar(length=3, default="EUR")
    valid_until = Date(null=True, default=None)
    notes = Text(default="")


class Invoice(RecordColumns, Table):
    number = Varchar(length=30)
    account_id = BigInt(null=True, default=None)
    status = Varchar(length=20)
    amount = money()
    tax = money()
    currency = Varchar(length=3, default="EUR")
    issue_date = Date(null=True, default=None)
    due_date = Date(null=True, default=None)
    paid_date = Date(null=True, default=None)
    notes = Text(default="")


class Task(RecordColumns, Table):
    title = Varchar(length=200)
    status = Varchar(length=20)
    priority = Varchar(length=10)
    due_date = Date(null=True, default=None)
    related_deal_id = BigInt(null=True, default=None)
    description = Text(default="")


class Expense(RecordColumns, Table):
    description = Varchar(length=200)
    category = Varchar(length=20)
    merchant = Varchar(length=120)
    amount = money()
    currency = Varchar(length=3, default="EUR")
    incurred_on = Date(null=True, default=None)
    status = Varchar(length=20)
    notes = Text(default="")


class Employee(RecordColumns, Table):
    full_name = Varchar(length=200)
    email = Varchar(length=254)
    job_title = Varchar(length=120)
    department = Varchar(length=60)
    start_date = Date(null=True, default=None)
    salary = money()
    currency = Varchar(length=3, default="EUR")
    employment_type = Varchar(length=20)
    manager_name = Varchar(length=200)
    status = Varchar(length=20)
    notes = Text(default="")


class CalendarEvent(RecordColumns, Table):
    title = Varchar(length=200)
    event_type = Varchar(length=20)
    starts_at = Timestamptz()
    ends_at = Timestamptz()
    location = Varchar(length=200)
    attendees = Text(default="")
    description = Text(default="")


class SigningEnvelope(RecordColumns, Table):
    subject = Varchar(length=200)
    document_name = Varchar(length=200)
    status = Varchar(length=20)
    signer_name = Varchar(length=200)
    signer_email = Varchar(length=254)
    related_deal_id = BigInt(null=True, default=None)
    sent_at = Timestamptz(null=True, default=None)
    completed_at = Timestamptz(null=True, default=None)
    message = Text(default="")


class InventoryItem(RecordColumns, Table):
    sku = Varchar(length=40)
    name = Varchar(length=200)
    warehouse = Varchar(length=60)
    quantity_on_hand = Integer(default=0)
    reorder_level = Integer(default=0)
    unit_cost = money()
    currency = Varchar(length=3, default="EUR")
    status = Varchar(length=20)
    notes = Text(default="")


class Product(RecordColumns, Table):
    sku = Varchar(length=40)
    name = Varchar(length=200)
    category = Varchar(length=60)
    unit_price = money()
    currency = Varchar(length=3, default="EUR")
    active = Boolean(default=True)
    description = Text(default="")


class DatasetDefinition(Table):
    """A dataset a company defines (records/defined.py): its columns and kinds, its key, what a proposal may
    change. Its rows live in `DatasetRow`; its name is unique in the company and never a built-in's."""

    company = ForeignKey(references=Company, null=False, index=True)
    name = Varchar(length=40)
    label = Varchar(length=200)
    # [{"name", "kind" (a ColumnKind), "enum": [..] | null, "nullable": bool, "max_length": int | null}]
    columns = JSON(default=[])
    key_column = Varchar(length=63)
    writable = JSON(default=[])  # the column names a proposed change may set
    template = Varchar(length=40, default="")  # the built-in it was started from, if any
    created_by = Varchar(length=254, default="")
    created_at = Timestamptz()
    updated_at = Timestamptz()
    version = Integer(default=1)


class DatasetRow(Table):
    """Every row of every company-defined dataset: the built-ins' system columns (company, owner, team,
    visibility, version) as real columns, so THE visibility rule (records/visibility.py) reads it as it reads a
    built-in table, and the company's own columns in `values` (JSONB on PostgreSQL). Unique on
    (dataset, external_key) and indexed on (dataset, id): see EXTRA_INDEXES and docs/datasets.md."""

    company = ForeignKey(references=Company, null=False, index=True)
    dataset = ForeignKey(references=DatasetDefinition, null=False)
    external_key = Varchar(length=200)
    owner = ForeignKey(references=User, null=False, index=True)
    team = ForeignKey(references=Team, null=True, default=None, index=True)
    visibility = Varchar(length=10, default="company")
    values = JSONB(default={})
    created_at = Timestamptz()
    updated_at = Timestamptz()
    version = Integer(default=1)


# Indexes Piccolo's table definitions cannot say (composite ones): made by the migration that makes the tables
# and by `db.create_tables_without_migrations`, so both schemas stay the same.
EXTRA_INDEXES = [
    'CREATE UNIQUE INDEX IF NOT EXISTS "dataset_definition_company_name" '
    'ON "dataset_definition" ("company", "name")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "dataset_row_dataset_key" ON "dataset_row" ("dataset", "external_key")',
    'CREATE INDEX IF NOT EXISTS "dataset_row_dataset_id" ON "dataset_row" ("dataset", "id")',
    # THE rule's columns, so counting what a reader sees is an index-only scan (docs/datasets.md)
    'CREATE INDEX IF NOT EXISTS "dataset_row_visible" '
    'ON "dataset_row" ("dataset", "visibility", "team", "owner", "company")',
]

TABLES = [
    Contact,
    Account,
    Deal,
    Quote,
    Invoice,
    Task,
    Expense,
    Employee,
    CalendarEvent,
    SigningEnvelope,
    InventoryItem,
    Product,
    DatasetDefinition,
    DatasetRow,
]
