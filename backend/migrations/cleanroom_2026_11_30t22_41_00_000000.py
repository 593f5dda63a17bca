"""Fills in the approval kind of runs approved before the previous migration, from the `approved_by`
prefix they were written with. The same SQL on SQLite and PostgreSQL."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-11-30T22:41:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "backfill run approval kind"

BACKFILL = """
UPDATE "run" SET "approval_kind" = CASE
    WHEN "approved_by" LIKE 'followup:%' THEN 'followup'
    WHEN "approved_by" LIKE 'schedule:%' THEN 'schedule'
    ELSE 'person'
END
WHERE "approved_at" IS NOT NULL AND "approval_kind" IS NULL
"""


async def _backfill() -> None:
    engine = engine_finder()
    assert engine is not None
    await engine.run_querystring(QueryString(BACKFILL))


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_backfill)
    return manager
