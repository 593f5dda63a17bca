"""The runs made before `run.staged_bytes` existed get the bytes their manifest lists (issue 30; the
column is the previous migration's)."""

import json
from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-12-03T11:00:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "the staged bytes of runs made before they were stored"


def _listed_bytes(manifest: Any) -> int:
    """What the manifest's files list, as `runs.limits.bundle_bytes` counted it when this was written (a
    migration keeps its own copy: it must mean the same however the code changes later)."""
    if isinstance(manifest, str):  # text on SQLite, and on PostgreSQL through asyncpg
        manifest = json.loads(manifest or "{}")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    sizes = [f.get("bytes") for f in files or [] if isinstance(f, dict)]
    return sum(n for n in sizes if type(n) is int and n > 0)


async def _backfill() -> None:
    engine = engine_finder()
    assert engine is not None
    rows = await engine.run_querystring(QueryString('SELECT "id", "manifest" FROM "run"'))
    for row in rows:
        size = _listed_bytes(row["manifest"])
        if size:
            await engine.run_querystring(
                QueryString('UPDATE "run" SET "staged_bytes" = {} WHERE "id" = {}', size, row["id"])
            )


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_backfill)
    return manager
