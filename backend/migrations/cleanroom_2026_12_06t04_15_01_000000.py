"""The rows of `api_lock` (the previous migration's table): one per short lock (`backend/locks.py`; a
migration keeps its own copy of the names: it must mean the same however the code changes later)."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-12-06T04:15:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "the rows of the API's lock table"
NAMES = ("chain", "schema")


async def _rows() -> None:
    engine = engine_finder()
    assert engine is not None
    for name in NAMES:
        await engine.run_querystring(
            QueryString('INSERT INTO "api_lock" ("name") VALUES ({}) ON CONFLICT DO NOTHING', name)
        )


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_rows)
    return manager
