"""The runs made before `run.staged_bytes` existed get the bytes their manifest lists (issue 30; the
column is the previous migration's)."""

import json
from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

from backend.runs.limits import bundle_bytes

ID = "2026-12-03T11:00:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "the staged bytes of runs made before they were stored"


def _manifest(value: Any) -> dict[str, Any] | None:
    """A JSON column as read back (text on SQLite, and on PostgreSQL through asyncpg)."""
    if isinstance(value, str):
        value = json.loads(value or "{}")
    return value if isinstance(value, dict) else None


async def _backfill() -> None:
    engine = engine_finder()
    assert engine is not None
    rows = await engine.run_querystring(QueryString('SELECT "id", "manifest" FROM "run"'))
    for row in rows:
        size = bundle_bytes(_manifest(row["manifest"]))
        if size:
            await engine.run_querystring(
                QueryString('UPDATE "run" SET "staged_bytes" = {} WHERE "id" = {}', size, row["id"])
            )


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_backfill)
    return manager
