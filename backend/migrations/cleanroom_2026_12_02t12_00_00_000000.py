"""Credits are one meter (issue 29, items 1 and 2): the charges the assistant platform files (chat turns and
other named kinds, once per idempotency key), the platform's operator-issued credentials, the operator's
plans and top-ups, and a company admin's limits within the pool (per person and per day). Written by hand
(additive: new tables, and two company columns)."""

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.base import OnDelete, OnUpdate
from piccolo.columns.column_types import Boolean, ForeignKey, Integer, Real, Serial, Timestamptz, Varchar
from piccolo.columns.defaults.timestamptz import TimestamptzNow
from piccolo.table import Table

from backend.migrations._columns import params

ID = "2026-12-02T12:00:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "platform charges and tokens, plans, top-ups, credit limits"


class Company(Table, tablename="company", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class User(Table, tablename="app_user", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


def _fk(references: type[Table], *, index: bool) -> dict[str, Any]:
    return {
        "references": references,
        "on_delete": OnDelete.cascade,
        "on_update": OnUpdate.cascade,
        "target_column": None,
        **params(None, index=index),
    }


def _unique(length: int) -> dict[str, Any]:
    return {**params("", index=True, length=length), "unique": True}


TABLES: list[tuple[str, str, list[tuple[str, type, dict[str, Any]]]]] = [
    (
        "PlatformCharge",
        "platform_charge",
        [
            ("company", ForeignKey, _fk(Company, index=True)),
            ("user", ForeignKey, _fk(User, index=False)),
            ("kind", Varchar, params("", length=32)),
            ("credits", Real, params(0.0)),
            ("idempotency_key", Varchar, _unique(200)),
            ("token_id", Integer, params(0)),
            ("left_after", Real, params(0.0)),
            ("at", Timestamptz, params(TimestamptzNow())),
        ],
    ),
    (
        "PlatformToken",
        "platform_token",
        [
            ("name", Varchar, params("", length=100)),
            ("prefix", Varchar, params("", length=16)),
            ("token_hash", Varchar, _unique(64)),
            ("created_at", Timestamptz, params(TimestamptzNow())),
            ("created_by", Varchar, params("", length=254)),
            ("last_used_at", Timestamptz, params(None, null=True)),
            ("revoked", Boolean, params(False)),
        ],
    ),
    (
        "CreditPlan",
        "credit_plan",
        [
            ("name", Varchar, {**params("", length=20), "unique": True}),
            ("monthly_credits", Integer, params(0)),
            ("updated_at", Timestamptz, params(TimestamptzNow())),
        ],
    ),
    (
        "CreditTopUp",
        "credit_top_up",
        [
            ("company", ForeignKey, _fk(Company, index=True)),
            ("credits", Integer, params(0)),
            ("reason", Varchar, params("", length=500)),
            ("actor", Varchar, params("", length=254)),
            ("at", Timestamptz, params(TimestamptzNow())),
        ],
    ),
]

COMPANY_COLUMNS = [
    ("credit_limit_per_person", Integer, params(0)),
    ("credit_limit_per_day", Integer, params(0)),
]


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    for class_name, tablename, columns in TABLES:
        manager.add_table(class_name=class_name, tablename=tablename, schema=None, columns=None)
        for column, column_class, column_params in columns:
            manager.add_column(
                table_class_name=class_name,
                tablename=tablename,
                column_name=column,
                db_column_name=column,
                column_class_name=column_class.__name__,
                column_class=column_class,
                params=column_params,
                schema=None,
            )
    for column, column_class, column_params in COMPANY_COLUMNS:
        manager.add_column(
            table_class_name="Company",
            tablename="company",
            column_name=column,
            db_column_name=column,
            column_class_name=column_class.__name__,
            column_class=column_class,
            params=column_params,
            schema=None,
        )
    return manager
