"""Each company's entries written before `audit_entry.company_seq` existed get their number: 1, 2, 3 … in seq
order (the previous migration's column). No hash of those form-1 entries covers it; the company chain's
links still order them, and `verify_company` checks the numbers follow each other."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.querystring import QueryString

ID = "2026-12-06T04:12:08:000000"
VERSION = "1.38.0"
DESCRIPTION = "the company_seq of audit entries written before it"


async def _company_seqs() -> None:
    """One statement (SQLite 3.33+ and PostgreSQL both take UPDATE … FROM and window functions)."""
    engine = engine_finder()
    assert engine is not None
    await engine.run_querystring(
        QueryString(
            'UPDATE "audit_entry" SET "company_seq" = "numbered"."n" FROM (SELECT "id", ROW_NUMBER() OVER '
            '(PARTITION BY "company_id" ORDER BY "seq") AS "n" FROM "audit_entry" WHERE "company_id" IS NOT NULL) '
            'AS "numbered" WHERE "audit_entry"."id" = "numbered"."id"'
        )
    )


async def forwards() -> MigrationManager:
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_company_seqs)
    return manager
