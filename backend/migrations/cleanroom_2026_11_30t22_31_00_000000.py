"""Fills in the columns of the previous migration for rows written before it (a migration's raw SQL runs
before its own column changes, hence a second one). The same SQL on SQLite and PostgreSQL."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-11-30T22:31:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "backfill run action item counts and credit charge run titles"

BACKFILL = [
    'UPDATE "run" SET "action_items_count" = '
    '(SELECT COUNT(*) FROM "action_item" WHERE "action_item"."run" = "run"."id")',
    'UPDATE "credit_charge" SET "run_title" = '
    'COALESCE((SELECT "title" FROM "run" WHERE "run"."id" = "credit_charge"."run_id"), \'\')',
]


async def _backfill() -> None:
    engine = engine_finder()
    assert engine is not None
    for sql in BACKFILL:
        await engine.run_querystring(QueryString(sql))


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_backfill)
    return manager
