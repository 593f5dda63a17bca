"""The API's lock tables (issue 52, D-M1): `api_lock`, one row per short lock taken FOR UPDATE, and
`api_leader`, locked by the fleet's dispatching process; they replace advisory-lock keys any database role
could take (`backend/locks.py`). Written by hand: two new tables; the next migration writes the rows (Piccolo
runs a migration's raw steps before its new tables)."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.column_types import Varchar

from backend.migrations._columns import params

ID = "2026-12-06T04:15:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "the API's lock tables"


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_table(class_name="ApiLock", tablename="api_lock", schema=None, columns=None)
    manager.add_table(class_name="ApiLeader", tablename="api_leader", schema=None, columns=None)
    manager.add_column(
        table_class_name="ApiLock",
        tablename="api_lock",
        column_name="name",
        db_column_name="name",
        column_class_name="Varchar",
        column_class=Varchar,
        params={**params("", length=40), "unique": True},
        schema=None,
    )
    return manager
