"""A run's staged bytes stored with it (issue 30): the limits on staged data summed the manifests of every
run in flight, decoding each, four times per proposal. Written by hand: one column; the next migration fills
it for the runs made before it (Piccolo runs a migration's raw steps before its new columns)."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.column_types import BigInt

from backend.migrations._columns import params

ID = "2026-12-03T11:00:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "a run's staged bytes, stored when it is made"


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_column(
        table_class_name="Run",
        tablename="run",
        column_name="staged_bytes",
        db_column_name="staged_bytes",
        column_class_name="BigInt",
        column_class=BigInt,
        params=params(0),
        schema=None,
    )
    return manager
