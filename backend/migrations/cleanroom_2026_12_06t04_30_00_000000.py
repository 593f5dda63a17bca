"""Platform credentials scoped to companies, idempotency keyed per credential (issue 52, D-L4). Written by hand.

- `platform_token_company`: the companies a credential may charge; `platform_token.all_companies`: the
  operator's explicit choice of every company. Credentials made before this have neither, so they charge
  nobody until the operator scopes them (`cleanroom platform token scope ID --company NAME` or
  `--all-companies`): a leaked global credential does not stay global by default.
- `platform_charge.idempotency_key` (unique) becomes `token_key`, still unique: the next two migrations add
  the platform's own key back as a plain column and fill `token_key` with the digest of credential and key.
  (A rename, because SQLite cannot drop a column's UNIQUE; the column keeps its 200 characters.)"""

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.base import OnDelete, OnUpdate
from piccolo.columns.column_types import Boolean, ForeignKey, Serial
from piccolo.table import Table

from backend.migrations._columns import params

ID = "2026-12-06T04:30:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "platform credentials scoped to companies; platform charges keyed per credential"


class Company(Table, tablename="company", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class PlatformToken(Table, tablename="platform_token", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


def _fk(references: type[Table], *, index: bool) -> dict[str, Any]:
    return {
        "references": references,
        "on_delete": OnDelete.cascade,
        "on_update": OnUpdate.cascade,
        "target_column": None,
        **params(None, index=index),
    }


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_table(
        class_name="PlatformTokenCompany", tablename="platform_token_company", schema=None, columns=None
    )
    for column, column_class, column_params in (
        ("token", ForeignKey, _fk(PlatformToken, index=True)),
        ("company", ForeignKey, _fk(Company, index=False)),
    ):
        manager.add_column(
            table_class_name="PlatformTokenCompany",
            tablename="platform_token_company",
            column_name=column,
            db_column_name=column,
            column_class_name=column_class.__name__,
            column_class=column_class,
            params=column_params,
            schema=None,
        )
    manager.add_column(
        table_class_name="PlatformToken",
        tablename="platform_token",
        column_name="all_companies",
        db_column_name="all_companies",
        column_class_name="Boolean",
        column_class=Boolean,
        params=params(False),
        schema=None,
    )
    manager.rename_column(
        table_class_name="PlatformCharge",
        tablename="platform_charge",
        old_column_name="idempotency_key",
        new_column_name="token_key",
    )
    return manager
