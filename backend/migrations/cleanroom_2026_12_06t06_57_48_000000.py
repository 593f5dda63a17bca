"""The injection warnings' tables (`staging.tables`, issue 55): the verdict cache and the admins'
acknowledgements, frozen as they were when this was written, created with the engine's own DDL, with their
composite indexes."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns import ForeignKey, Text, Timestamptz, Varchar
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString
from piccolo.table import Table


class Company(Table, tablename="company"):
    pass


ID = "2026-12-06T06:57:48:000000"
VERSION = "1.38.0"
DESCRIPTION = "injection_verdict and injection_acknowledgement"


class InjectionVerdict(Table, tablename="injection_verdict"):
    company = ForeignKey(references=Company, null=False)
    cell_sha256 = Varchar(length=64)
    fingerprint = Varchar(length=64)
    verdict = Text()
    stored_at = Timestamptz()


class InjectionAcknowledgement(Table, tablename="injection_acknowledgement"):
    company = ForeignKey(references=Company, null=False)
    cell_sha256 = Varchar(length=64)
    column_name = Text(default="")
    reason = Text()
    acknowledged_by = Varchar(length=320)
    acknowledged_at = Timestamptz()


INDEXES = [
    'CREATE UNIQUE INDEX IF NOT EXISTS "injection_verdict_key" '
    'ON "injection_verdict" ("company", "cell_sha256", "fingerprint")',
    'CREATE INDEX IF NOT EXISTS "injection_verdict_age" ON "injection_verdict" ("company", "stored_at")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "injection_acknowledgement_key" '
    'ON "injection_acknowledgement" ("company", "cell_sha256", "column_name")',
]


async def _create() -> None:
    engine = engine_finder()
    assert engine is not None
    for table in (Company, InjectionVerdict, InjectionAcknowledgement):
        table._meta.db = engine  # the database being migrated, not the one found when this module loaded
    await InjectionVerdict.create_table(if_not_exists=True)
    await InjectionAcknowledgement.create_table(if_not_exists=True)
    for statement in INDEXES:
        await engine.run_querystring(QueryString(statement))


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_create)
    return manager
