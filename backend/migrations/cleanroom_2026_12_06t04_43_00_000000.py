"""Datasets a company defines (issue 54, item 1): `dataset_definition` (name, label, columns and kinds, key,
writable columns) and `dataset_row` (every row of every such dataset, with the built-ins' owner, team,
visibility and version columns, and the company's values as JSON: JSONB on PostgreSQL). Written by hand
(additive: two new tables; their composite indexes come in the next migration, which runs after them)."""

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.base import OnDelete, OnUpdate
from piccolo.columns.column_types import JSON, JSONB, ForeignKey, Integer, Serial, Timestamptz, Varchar
from piccolo.columns.defaults.timestamptz import TimestamptzNow
from piccolo.table import Table

from backend.migrations._columns import params

ID = "2026-12-06T04:43:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "datasets a company defines, and their rows"


class Company(Table, tablename="company", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class User(Table, tablename="app_user", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class Team(Table, tablename="team", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class DatasetDefinition(Table, tablename="dataset_definition", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


def _fk(references: type[Table], *, index: bool, null: bool = False) -> dict[str, Any]:
    return {
        "references": references,
        "on_delete": OnDelete.cascade,
        "on_update": OnUpdate.cascade,
        "target_column": None,
        **params(None, index=index, null=null),
    }


TABLES: list[tuple[str, str, list[tuple[str, type, dict[str, Any]]]]] = [
    (
        "DatasetDefinition",
        "dataset_definition",
        [
            ("company", ForeignKey, _fk(Company, index=True)),
            ("name", Varchar, params("", length=40)),
            ("label", Varchar, params("", length=200)),
            ("columns", JSON, params("[]")),
            ("key_column", Varchar, params("", length=63)),
            ("writable", JSON, params("[]")),
            ("template", Varchar, params("", length=40)),
            ("created_by", Varchar, params("", length=254)),
            ("created_at", Timestamptz, params(TimestamptzNow())),
            ("updated_at", Timestamptz, params(TimestamptzNow())),
            ("version", Integer, params(1)),
        ],
    ),
    (
        "DatasetRow",
        "dataset_row",
        [
            ("company", ForeignKey, _fk(Company, index=True)),
            ("dataset", ForeignKey, _fk(DatasetDefinition, index=False)),
            ("external_key", Varchar, params("", length=200)),
            ("owner", ForeignKey, _fk(User, index=True)),
            ("team", ForeignKey, _fk(Team, index=True, null=True)),
            ("visibility", Varchar, params("company", length=10)),
            ("values", JSONB, params("{}")),
            ("created_at", Timestamptz, params(TimestamptzNow())),
            ("updated_at", Timestamptz, params(TimestamptzNow())),
            ("version", Integer, params(1)),
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
