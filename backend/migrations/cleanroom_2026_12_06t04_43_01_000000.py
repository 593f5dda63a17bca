"""The composite indexes of the company-defined datasets' tables (`records.tables.EXTRA_INDEXES` as they were
when this was written): one company's dataset names are unique, one dataset's external keys are unique, and
a dataset's rows are read in id order. A migration of its own because Piccolo runs a migration's raw steps
before the tables it adds."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-12-06T04:43:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "indexes of the company-defined datasets"


INDEXES = [
    'CREATE UNIQUE INDEX IF NOT EXISTS "dataset_definition_company_name" '
    'ON "dataset_definition" ("company", "name")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "dataset_row_dataset_key" ON "dataset_row" ("dataset", "external_key")',
    'CREATE INDEX IF NOT EXISTS "dataset_row_dataset_id" ON "dataset_row" ("dataset", "id")',
    # THE rule's columns, so counting what a reader sees is an index-only scan (docs/datasets.md)
    'CREATE INDEX IF NOT EXISTS "dataset_row_visible" '
    'ON "dataset_row" ("dataset", "visibility", "team", "owner", "company")',
]


async def _indexes() -> None:
    engine = engine_finder()
    assert engine is not None
    for statement in INDEXES:
        await engine.run_querystring(QueryString(statement))


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_indexes)
    return manager
