"""Re-run for evidence (issue 28, item 5): the company's data-retention choice (days an approved bundle is
kept after its run; 0, the default, keeps none) and the re-runs an admin or auditor asked for. Written by hand
(additive: one new table, one company column)."""

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.base import OnDelete, OnUpdate
from piccolo.columns.column_types import JSON, ForeignKey, Integer, Serial, Text, Timestamptz, Varchar
from piccolo.columns.defaults.timestamptz import TimestamptzNow
from piccolo.table import Table

from backend.migrations._columns import params

ID = "2026-12-02T15:40:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "evidence re-runs and the company's bundle retention for them"


class Company(Table, tablename="company", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class User(Table, tablename="app_user", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class Run(Table, tablename="run", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


def _fk(references: type[Table], *, index: bool) -> dict[str, Any]:
    return {
        "references": references,
        "on_delete": OnDelete.cascade,
        "on_update": OnUpdate.cascade,
        "target_column": None,
        **params(None, index=index),
    }


RERUN_COLUMNS: list[tuple[str, type, dict[str, Any]]] = [
    ("run", ForeignKey, _fk(Run, index=True)),
    ("company", ForeignKey, _fk(Company, index=True)),
    ("requested_by", ForeignKey, _fk(User, index=False)),
    ("actor", Varchar, params("", length=254)),
    ("status", Varchar, params("", index=True, length=20)),
    ("created_at", Timestamptz, params(TimestamptzNow())),
    ("started_at", Timestamptz, params(None, null=True)),
    ("finished_at", Timestamptz, params(None, null=True)),
    ("outcome", JSON, params(None, null=True)),
    ("comparison", JSON, params(None, null=True)),
    ("error_message", Text, params(None, null=True)),
]


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_table(class_name="EvidenceRerun", tablename="evidence_rerun", schema=None, columns=None)
    for column, column_class, column_params in RERUN_COLUMNS:
        manager.add_column(
            table_class_name="EvidenceRerun",
            tablename="evidence_rerun",
            column_name=column,
            db_column_name=column,
            column_class_name=column_class.__name__,
            column_class=column_class,
            params=column_params,
            schema=None,
        )
    manager.add_column(
        table_class_name="Company",
        tablename="company",
        column_name="evidence_retention_days",
        db_column_name="evidence_retention_days",
        column_class_name="Integer",
        column_class=Integer,
        params=params(0),
        schema=None,
    )
    return manager
