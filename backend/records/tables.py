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
from piccolo.columns.base import OnDelete
from piccolo.table import Table

from backend.records.columns import VISIBILITIES as VISIBILITIES  # where its readers have always found it
from backend.tenancy.tables import Company, Team, User


class RecordColumns:
    company = ForeignKey(references=Company, null=False, index=True)
    owner = ForeignKey(references=User, null=False, index=True)
    # a deleted team's rows stay with their owners, shared with nobody through it (tenancy/grid.delete_team)
    team = ForeignKey(references=Team, null=True, default=None, index=True, on_delete=OnDelete.set_null)
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
    (dataset, external_key) and indexed on (dataset, id): see EXTRA_INDEXES and docs/datasets.md.

    Its references (company, dataset, owner, team) are checked once per statement on PostgreSQL, not once per
    row (`REFERENCE_CHECKS`); on SQLite they are the FOREIGN KEYs these columns declare."""

    # every read of the table is within one dataset: no index of its own
    company = ForeignKey(references=Company, null=False)
    dataset = ForeignKey(references=DatasetDefinition, null=False)
    external_key = Varchar(length=200)
    owner = ForeignKey(references=User, null=False, index=True)  # a person's deletion finds their rows
    # indexed where set: EXTRA_INDEXES; a deleted team's rows keep existing, with no team (as RecordColumns')
    team = ForeignKey(references=Team, null=True, default=None, on_delete=OnDelete.set_null)
    visibility = Varchar(length=10, default="company")
    values = JSONB(default={})
    created_at = Timestamptz()
    updated_at = Timestamptz()
    version = Integer(default=1)


# Indexes Piccolo's table definitions cannot say (composite or partial ones): made by the migrations and by
# `db.create_tables_without_migrations`, so both schemas stay the same. Which query needs which index, and
# what each costs an import: docs/datasets.md.
EXTRA_INDEXES = [
    'CREATE UNIQUE INDEX IF NOT EXISTS "dataset_definition_company_name" '
    'ON "dataset_definition" ("company", "name")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "dataset_row_dataset_key" ON "dataset_row" ("dataset", "external_key")',
    'CREATE INDEX IF NOT EXISTS "dataset_row_dataset_id" ON "dataset_row" ("dataset", "id")',
    # THE rule's columns, so counting what a reader sees is an index-only scan (docs/datasets.md)
    'CREATE INDEX IF NOT EXISTS "dataset_row_visible" '
    'ON "dataset_row" ("dataset", "visibility", "team", "owner", "company")',
    # a team's deletion finds its rows; a row without a team (most of an import) costs this index nothing
    'CREATE INDEX IF NOT EXISTS "dataset_row_team" ON "dataset_row" ("team") WHERE "team" IS NOT NULL',
]

# PostgreSQL: `dataset_row`'s references checked once per statement instead of once per row. A FOREIGN KEY
# runs one lookup per row and reference (3-4 a row): more than half of the database's time in an import
# (docs/datasets.md). These triggers keep what the FOREIGN KEYs guaranteed, for a whole statement at once:
# - every row an INSERT writes names a dataset of its own company (stronger than before: the row's company is
#   its dataset's), an existing owner, and an existing team or none, checked once per statement over its
#   transition table; a row an UPDATE moves to another owner, team or dataset is checked alone (rare: an
#   upsert that keeps them is not checked, as a FOREIGN KEY skips an unchanged key); else the statement fails
#   with SQLSTATE 23503 (foreign_key_violation), as with a FOREIGN KEY;
# - the rows it names are locked FOR KEY SHARE, as a FOREIGN KEY's check locks them, so a concurrent delete of
#   one waits for the writing transaction to end (and then reaches the new rows too, below);
# - deleting a dataset definition or a person deletes their rows (ON DELETE CASCADE, as before; a company's
#   deletion reaches them through its dataset definitions, whose FOREIGN KEY cascades); deleting a team keeps
#   its rows, with no team (ON DELETE SET NULL, as the built-in tables' `team`): they stay with their owners,
#   and a `team` row is then seen by nobody through a team (records/visibility.py, tenancy/grid.delete_team).
# SQLite keeps the columns' FOREIGN KEYs (its checks are in-process lookups).
REFERENCE_CHECKS = [
    """CREATE OR REPLACE FUNCTION "dataset_row_references"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  bad text;
BEGIN
  PERFORM 1 FROM "dataset_definition" d WHERE d.id IN (SELECT n.dataset FROM new_rows n) FOR KEY SHARE;
  SELECT format('dataset %s of company %s', n.dataset, n.company) INTO bad
    FROM (SELECT DISTINCT dataset, company FROM new_rows) n
    WHERE NOT EXISTS (SELECT 1 FROM "dataset_definition" d WHERE d.id = n.dataset AND d.company = n.company)
    LIMIT 1;
  IF FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = 'dataset_row names no ' || bad;
  END IF;
  PERFORM 1 FROM "app_user" u WHERE u.id IN (SELECT n.owner FROM new_rows n) FOR KEY SHARE;
  SELECT format('owner %s', n.owner) INTO bad FROM (SELECT DISTINCT owner FROM new_rows) n
    WHERE NOT EXISTS (SELECT 1 FROM "app_user" u WHERE u.id = n.owner) LIMIT 1;
  IF FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = 'dataset_row names no ' || bad;
  END IF;
  PERFORM 1 FROM "team" m WHERE m.id IN (SELECT n.team FROM new_rows n) FOR KEY SHARE;
  SELECT format('team %s', n.team) INTO bad FROM (SELECT DISTINCT team FROM new_rows WHERE team IS NOT NULL) n
    WHERE NOT EXISTS (SELECT 1 FROM "team" m WHERE m.id = n.team) LIMIT 1;
  IF FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = 'dataset_row names no ' || bad;
  END IF;
  RETURN NULL;
END $fn$""",
    """CREATE OR REPLACE FUNCTION "dataset_row_references_changed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM 1 FROM "dataset_definition" d WHERE d.id = NEW.dataset AND d.company = NEW.company FOR KEY SHARE;
  IF NOT FOUND THEN
    RAISE foreign_key_violation
      USING MESSAGE = format('dataset_row names no dataset %s of company %s', NEW.dataset, NEW.company);
  END IF;
  PERFORM 1 FROM "app_user" u WHERE u.id = NEW.owner FOR KEY SHARE;
  IF NOT FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = format('dataset_row names no owner %s', NEW.owner);
  END IF;
  IF NEW.team IS NOT NULL THEN
    PERFORM 1 FROM "team" m WHERE m.id = NEW.team FOR KEY SHARE;
    IF NOT FOUND THEN
      RAISE foreign_key_violation USING MESSAGE = format('dataset_row names no team %s', NEW.team);
    END IF;
  END IF;
  RETURN NULL;
END $fn$""",
    """CREATE OR REPLACE FUNCTION "dataset_row_references_gone"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_TABLE_NAME = 'dataset_definition' THEN
    DELETE FROM "dataset_row" WHERE "dataset" IN (SELECT id FROM gone);
  ELSIF TG_TABLE_NAME = 'app_user' THEN
    DELETE FROM "dataset_row" WHERE "owner" IN (SELECT id FROM gone);
  ELSIF TG_TABLE_NAME = 'team' THEN
    UPDATE "dataset_row" SET "team" = NULL WHERE "team" IN (SELECT id FROM gone);
  END IF;
  RETURN NULL;
END $fn$""",
    'ALTER TABLE "dataset_row" DROP CONSTRAINT IF EXISTS "dataset_row_company_fkey", '
    'DROP CONSTRAINT IF EXISTS "dataset_row_dataset_fkey", DROP CONSTRAINT IF EXISTS "dataset_row_owner_fkey", '
    'DROP CONSTRAINT IF EXISTS "dataset_row_team_fkey"',
    'DROP TRIGGER IF EXISTS "dataset_row_inserted" ON "dataset_row"',
    'CREATE TRIGGER "dataset_row_inserted" AFTER INSERT ON "dataset_row" REFERENCING NEW TABLE AS new_rows '
    'FOR EACH STATEMENT EXECUTE FUNCTION "dataset_row_references"()',
    'DROP TRIGGER IF EXISTS "dataset_row_updated" ON "dataset_row"',
    # an UPDATE: only a row whose references change is checked (an import's or a sync's upsert keeps them:
    # the condition is evaluated in C, no function called), as a FOREIGN KEY skips an unchanged key and a
    # NULL one (a deleted team's rows, un-teamed above, are not looked up one by one)
    'CREATE TRIGGER "dataset_row_updated" AFTER UPDATE ON "dataset_row" FOR EACH ROW '
    'WHEN ((OLD."company", OLD."dataset", OLD."owner") IS DISTINCT FROM (NEW."company", NEW."dataset", '
    'NEW."owner") OR (NEW."team" IS NOT NULL AND NEW."team" IS DISTINCT FROM OLD."team")) '
    'EXECUTE FUNCTION "dataset_row_references_changed"()',
    *(
        statement
        for parent in ("dataset_definition", "app_user", "team")
        for statement in (
            f'DROP TRIGGER IF EXISTS "dataset_row_references_gone" ON "{parent}"',
            f'CREATE TRIGGER "dataset_row_references_gone" AFTER DELETE ON "{parent}" '
            'REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION "dataset_row_references_gone"()',
        )
    ),
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
