"""Per-company OpenID Connect sign-in (issue 53): the company's provider and the sign-ins under way. Written
by hand (additive: two new tables)."""

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.base import OnDelete, OnUpdate
from piccolo.columns.column_types import JSON, Boolean, ForeignKey, Serial, Timestamptz, Varchar
from piccolo.columns.defaults.timestamptz import TimestamptzNow
from piccolo.table import Table

from backend.migrations._columns import params

ID = "2026-12-06T04:50:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "a company's OpenID Connect provider and the sign-ins sent to it"


class Company(Table, tablename="company", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


def _unique(params_: dict[str, Any], *, index: bool) -> dict[str, Any]:
    return {**params_, "unique": True, "index": index}


def _company(*, unique: bool) -> dict[str, Any]:
    return {
        "references": Company,
        "on_delete": OnDelete.cascade,
        "on_update": OnUpdate.cascade,
        "target_column": None,
        **params(None),
        "unique": unique,
    }


TABLES: list[tuple[str, str, list[tuple[str, type, dict[str, Any]]]]] = [
    (
        "CompanySso",
        "company_sso",
        [
            ("company", ForeignKey, _company(unique=True)),
            ("issuer", Varchar, params("", length=500)),
            ("client_id", Varchar, params("", length=300)),
            ("client_secret", Varchar, {**params("", length=500), "secret": True}),
            ("domains", JSON, params("[]")),
            ("jit_membership", Boolean, params(False)),
            ("enabled", Boolean, params(True)),
            ("updated_at", Timestamptz, params(TimestamptzNow())),
        ],
    ),
    (
        "SsoSignIn",
        "sso_sign_in",
        [
            ("state_hash", Varchar, _unique(params("", length=64), index=True)),
            ("company", ForeignKey, _company(unique=False)),
            ("nonce", Varchar, params("", length=100)),
            ("code_verifier", Varchar, {**params("", length=200), "secret": True}),
            ("created_at", Timestamptz, params(TimestamptzNow())),
            ("expires_at", Timestamptz, params(TimestamptzNow())),
        ],
    ),
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
    return manager
