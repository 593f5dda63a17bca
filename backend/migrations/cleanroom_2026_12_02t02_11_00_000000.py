"""Flow steps that ran before `run.source_datasets`: a later step's outputs were tagged with its own
sources only (review N-H1). Each step gets the union of its own sources (its datasets, its staged Drive
files' tags) and every earlier step's, on its run and on the Drive files and folders it filed."""

import json
from typing import Any

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-12-02T02:11:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "flow step outputs inherit earlier steps' tags"


def _list(value: Any) -> list[Any]:
    """A JSON list column as read back (text on SQLite, and on PostgreSQL through asyncpg)."""
    if isinstance(value, str):
        value = json.loads(value or "[]")
    return list(value or [])


async def _retag_flow_steps() -> None:
    engine = engine_finder()
    assert engine is not None

    async def sql(query: str, *args: Any) -> list[dict[str, Any]]:
        return await engine.run_querystring(QueryString(query, *args))

    file_tags = {
        r["id"]: set(_list(r["source_datasets"]))
        for r in await sql('SELECT "id", "source_datasets" FROM "drive_file" WHERE "run_id" IS NOT NULL')
    }
    steps = await sql(
        'SELECT "id", "flow_id", "datasets", "file_ids" FROM "run" WHERE "flow_id" IS NOT NULL '
        'ORDER BY "flow_id", "flow_step", "id"'
    )
    union: dict[int, set[str]] = {}  # per flow: every step read so far
    for step in steps:
        sources = union.setdefault(step["flow_id"], set())
        sources.update(_list(step["datasets"]))
        for file_id in _list(step["file_ids"]):
            sources.update(file_tags.get(file_id, set()))
        tags = json.dumps(sorted(sources))
        await sql('UPDATE "run" SET "source_datasets" = {} WHERE "id" = {}', tags, step["id"])
        for table in ("drive_file", "drive_folder"):
            await sql(
                f'UPDATE "{table}" SET "source_datasets" = {{}} WHERE "run_id" = {{}}', tags, step["id"]
            )
        for row in await sql('SELECT "id" FROM "drive_file" WHERE "run_id" = {}', step["id"]):
            file_tags[row["id"]] = set(sources)  # a later flow that staged this output reads it re-tagged


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_retag_flow_steps)
    return manager
