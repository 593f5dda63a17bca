"""Follow-up grants: how many follow-ups an approval has let through (claimed atomically), and why a
follow-up fell back to normal approval. Written by hand (small, additive)."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.column_types import Integer, Text
from piccolo.columns.indexes import IndexMethod

ID = "2026-11-30T21:34:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "follow-up grant use count and fallback note"


def _params(default, *, null: bool = False) -> dict:
    return {
        "default": default,
        "null": null,
        "primary_key": False,
        "unique": False,
        "index": False,
        "index_method": IndexMethod.btree,
        "choices": None,
        "db_column_name": None,
        "secret": False,
    }


# (table class, table name, column, column class, params)
COLUMNS = [
    ("Run", "run", "followup_grant_used", Integer, _params(0)),
    ("Run", "run", "followup_note", Text, _params(None, null=True)),
]


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    for table_class, tablename, column, column_class, params in COLUMNS:
        manager.add_column(
            table_class_name=table_class,
            tablename=tablename,
            column_name=column,
            db_column_name=column,
            column_class_name=column_class.__name__,
            column_class=column_class,
            params=params,
            schema=None,
        )
    return manager
