"""Companies run by their own people (issue 53): the one-time links people set a password with (invitations
and resets, stored hashed), a team's permission sets (the grid's team rows), and the company's `demo` mark
(only a demo company keeps the demo's short passwords). Written by hand (additive: two tables, one column)."""

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.base import OnDelete, OnUpdate
from piccolo.columns.column_types import Boolean, ForeignKey, Serial, Timestamptz, Varchar
from piccolo.columns.defaults.timestamptz import TimestamptzNow
from piccolo.table import Table

from backend.migrations._columns import params

ID = "2026-12-06T04:45:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "person links (invitations, resets), team permission sets, demo companies"


class User(Table, tablename="app_user", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class Team(Table, tablename="team", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


class PermissionSet(Table, tablename="permission_set", schema=None):
    id = Serial(null=False, primary_key=True, unique=False, index=False, db_column_name="id", secret=False)


def _fk(references: type[Table], *, index: bool) -> dict[str, Any]:
    return {
        "references": references,
        "on_delete": OnDelete.cascade,
        "on_update": OnUpdate.cascade,
        "target_column": None,
        **params(None, index=index),
    }


TABLES: list[tuple[str, str, list[tuple[str, type, dict[str, Any]]]]] = [
    (
        "TeamPermissionSet",
        "team_permission_set",
        [
            ("team", ForeignKey, _fk(Team, index=True)),
            ("permission_set", ForeignKey, _fk(PermissionSet, index=False)),
        ],
    ),
    (
        "PersonLink",
        "person_link",
        [
            ("user", ForeignKey, _fk(User, index=True)),
            ("kind", Varchar, params("", length=10)),
            ("token_hash", Varchar, {**params("", index=True, length=64), "unique": True}),
            ("created_by", Varchar, params("", length=300)),
            ("created_at", Timestamptz, params(TimestamptzNow())),
            ("expires_at", Timestamptz, params(TimestamptzNow())),
            ("used_at", Timestamptz, params(None, null=True)),
            ("revoked", Boolean, params(False)),
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
    manager.add_column(
        table_class_name="Company",
        tablename="company",
        column_name="demo",
        db_column_name="demo",
        column_class_name="Boolean",
        column_class=Boolean,
        params=params(False),
        schema=None,
    )
    return manager
