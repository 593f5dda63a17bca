"""Deleting a team keeps its rows (it deleted them: an admin's click lost a company's records). Every table
whose rows carry an owner, a team and a visibility (the twelve built-in record tables, Drive's folders and
files, and `dataset_row`) now has `team` ON DELETE SET NULL instead of CASCADE: a deleted team's rows stay
with their owners, and a `team` row is then seen by nobody through a team (`records.visibility`). A team's
memberships and grants still go with it.

- SQLite cannot change a FOREIGN KEY's action: each of these tables is rebuilt under its own name, its SQL
  as stored with only the `team` column's ON DELETE changed, every row copied (ids kept), its indexes made
  again as they were. Done with foreign keys on, inside the migration's transaction: the old tables are
  renamed aside first, so dropping them cascades into nothing (`drive_file` references `drive_folder`).
- PostgreSQL: the fourteen FOREIGN KEYs are altered in place; `dataset_row`'s team is kept by its
  statement-level trigger (`records.tables.REFERENCE_CHECKS`, as it is when this is written), whose team
  branch now nulls the team instead of deleting the rows, and whose per-row UPDATE check skips a team
  changed to NULL, as a FOREIGN KEY does."""

from __future__ import annotations

import re

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.base import Engine
from piccolo.engine.finder import engine_finder
from piccolo.engine.postgres import PostgresEngine
from piccolo.querystring import QueryString

ID = "2026-12-06T13:00:29:000000"
VERSION = "1.38.0"
DESCRIPTION = "a deleted team's rows stay with their owners: team ON DELETE SET NULL"

# parents before children (drive_file references drive_folder)
TABLES = [
    "contact",
    "account",
    "deal",
    "quote",
    "invoice",
    "task",
    "expense",
    "employee",
    "calendar_event",
    "signing_envelope",
    "inventory_item",
    "product",
    "drive_folder",
    "drive_file",
    "dataset_row",
]
POSTGRES_FOREIGN_KEYS = [t for t in TABLES if t != "dataset_row"]  # dataset_row's are triggers there

TEAM_CASCADE = re.compile(r'("team" INTEGER REFERENCES "team" \("id"\) ON DELETE) CASCADE\b')

TEAM_GONE = """CREATE OR REPLACE FUNCTION "dataset_row_references_gone"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_TABLE_NAME = 'dataset_definition' THEN
    DELETE FROM "dataset_row" WHERE "dataset" IN (SELECT id FROM gone);
  ELSIF TG_TABLE_NAME = 'app_user' THEN
    DELETE FROM "dataset_row" WHERE "owner" IN (SELECT id FROM gone);
  ELSIF TG_TABLE_NAME = 'team' THEN
    UPDATE "dataset_row" SET "team" = NULL WHERE "team" IN (SELECT id FROM gone);
  END IF;
  RETURN NULL;
END $fn$"""

UPDATE_CHECK = [
    'DROP TRIGGER IF EXISTS "dataset_row_updated" ON "dataset_row"',
    'CREATE TRIGGER "dataset_row_updated" AFTER UPDATE ON "dataset_row" FOR EACH ROW '
    'WHEN ((OLD."company", OLD."dataset", OLD."owner") IS DISTINCT FROM (NEW."company", NEW."dataset", '
    'NEW."owner") OR (NEW."team" IS NOT NULL AND NEW."team" IS DISTINCT FROM OLD."team")) '
    'EXECUTE FUNCTION "dataset_row_references_changed"()',
]


async def _sql(engine: Engine, sql: str) -> list[dict]:
    return await engine.run_querystring(QueryString(sql))


async def _postgres(engine: Engine) -> None:
    for table in POSTGRES_FOREIGN_KEYS:
        names = await _sql(
            engine,
            "SELECT conname FROM pg_constraint WHERE contype = 'f' "
            f"AND conrelid = '\"{table}\"'::regclass AND confrelid = '\"team\"'::regclass",
        )
        drops = "".join(f'DROP CONSTRAINT "{r["conname"]}", ' for r in names)
        await _sql(
            engine,
            f'ALTER TABLE "{table}" {drops}ADD CONSTRAINT "{table}_team_fkey" FOREIGN KEY ("team") '
            'REFERENCES "team" ("id") ON DELETE SET NULL ON UPDATE CASCADE',
        )
    for statement in [TEAM_GONE, *UPDATE_CHECK]:
        await _sql(engine, statement)


async def _sqlite(engine: Engine) -> None:
    names = ", ".join(f"'{t}'" for t in TABLES)
    tables = {
        r["name"]: r["sql"]
        for r in await _sql(
            engine, f"SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN ({names})"
        )
    }
    # indexes (and any trigger) as they are, to make again on the new tables; a UNIQUE column's own index
    # (no SQL) comes back with the table
    extras = [
        r["sql"]
        for r in await _sql(
            engine,
            f"SELECT sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name IN ({names}) "
            "AND sql IS NOT NULL ORDER BY type, name",
        )
    ]
    # a table outside this set referencing one inside would lose rows when the old table is dropped
    for r in await _sql(engine, "SELECT name FROM sqlite_master WHERE type = 'table'"):
        if r["name"] in tables:
            continue
        for fk in await _sql(engine, f"SELECT * FROM pragma_foreign_key_list('{r['name']}')"):
            if fk["table"] in tables:
                raise RuntimeError(f"{r['name']} references {fk['table']}: cannot rebuild it here")
    order = [t for t in TABLES if t in tables]
    for table in order:
        await _sql(engine, f'ALTER TABLE "{table}" RENAME TO "{table}__before_set_null"')
    for table in order:
        ddl, changed = TEAM_CASCADE.subn(r"\1 SET NULL", tables[table])
        if changed != 1:
            raise RuntimeError(f"{table}: no team column ON DELETE CASCADE in {tables[table]!r}")
        await _sql(engine, ddl)
        # the same columns in the same order; every reference checked again as the rows go in
        await _sql(engine, f'INSERT INTO "{table}" SELECT * FROM "{table}__before_set_null"')
    for table in reversed(order):  # children first: nothing references a table when it is dropped
        await _sql(engine, f'DROP TABLE "{table}__before_set_null"')
    for statement in extras:
        await _sql(engine, statement)


async def _apply() -> None:
    engine = engine_finder()
    assert engine is not None
    if isinstance(engine, PostgresEngine):
        await _postgres(engine)
    else:
        await _sqlite(engine)


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_apply)
    return manager
