"""What the small hand-written migrations share: adding plain columns. (Piccolo skips modules whose name
starts with an underscore when it looks for migrations.)"""

from __future__ import annotations

from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.indexes import IndexMethod

# (table class, table name, column, column class, params)
Column = tuple[str, str, str, type, dict[str, Any]]


def params(
    default: Any, *, null: bool = False, index: bool = False, length: int | None = None
) -> dict[str, Any]:
    """The column parameters Piccolo records for a plain (not primary, not unique) column."""
    out: dict[str, Any] = {
        "default": default,
        "null": null,
        "primary_key": False,
        "unique": False,
        "index": index,
        "index_method": IndexMethod.btree,
        "choices": None,
        "db_column_name": None,
        "secret": False,
    }
    if length is not None:
        out["length"] = length
    return out


def add_columns(migration_id: str, description: str, columns: list[Column]) -> MigrationManager:
    manager = MigrationManager(migration_id=migration_id, app_name="cleanroom", description=description)
    for table_class, tablename, column, column_class, column_params in columns:
        manager.add_column(
            table_class_name=table_class,
            tablename=tablename,
            column_name=column,
            db_column_name=column,
            column_class_name=column_class.__name__,
            column_class=column_class,
            params=column_params,
            schema=None,
        )
    return manager
