"""`dataset_row` made cheaper to fill (issue 54's import speed; figures in docs/datasets.md):
- PostgreSQL: its four FOREIGN KEYs (company, dataset, owner, team), each a lookup per row written, replaced
  by checks once per INSERT statement, and per row an UPDATE moves to other references
  (`records.tables.REFERENCE_CHECKS` as it was when this was written: the same
  guarantees, the same locks, the same cascades on delete);
- both engines: the index on `company` dropped (every read of the table is within one dataset, and the
  row's company is its dataset's), and the one on `team` kept only where a row has a team."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.engine.finder import engine_finder
from piccolo.engine.postgres import PostgresEngine
from piccolo.querystring import QueryString

ID = "2026-12-06T09:46:46:000000"
VERSION = "1.38.0"
DESCRIPTION = "dataset_row: references checked per statement, company index dropped, team index partial"

INDEXES = [
    'DROP INDEX IF EXISTS "dataset_row_company"',
    'DROP INDEX IF EXISTS "dataset_row_team"',
    'CREATE INDEX IF NOT EXISTS "dataset_row_team" ON "dataset_row" ("team") WHERE "team" IS NOT NULL',
]

REFERENCE_CHECKS = [
    """CREATE OR REPLACE FUNCTION "dataset_row_references"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  bad text;
BEGIN
  PERFORM 1 FROM "dataset_definition" d WHERE d.id IN (SELECT n.dataset FROM new_rows n) FOR KEY SHARE;
  SELECT format('dataset %s of company %s', n.dataset, n.company) INTO bad
    FROM (SELECT DISTINCT dataset, company FROM new_rows) n
    WHERE NOT EXISTS (SELECT 1 FROM "dataset_definition" d WHERE d.id = n.dataset AND d.company = n.company)
    LIMIT 1;
  IF FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = 'dataset_row names no ' || bad;
  END IF;
  PERFORM 1 FROM "app_user" u WHERE u.id IN (SELECT n.owner FROM new_rows n) FOR KEY SHARE;
  SELECT format('owner %s', n.owner) INTO bad FROM (SELECT DISTINCT owner FROM new_rows) n
    WHERE NOT EXISTS (SELECT 1 FROM "app_user" u WHERE u.id = n.owner) LIMIT 1;
  IF FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = 'dataset_row names no ' || bad;
  END IF;
  PERFORM 1 FROM "team" m WHERE m.id IN (SELECT n.team FROM new_rows n) FOR KEY SHARE;
  SELECT format('team %s', n.team) INTO bad FROM (SELECT DISTINCT team FROM new_rows WHERE team IS NOT NULL) n
    WHERE NOT EXISTS (SELECT 1 FROM "team" m WHERE m.id = n.team) LIMIT 1;
  IF FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = 'dataset_row names no ' || bad;
  END IF;
  RETURN NULL;
END $fn$""",
    """CREATE OR REPLACE FUNCTION "dataset_row_references_changed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM 1 FROM "dataset_definition" d WHERE d.id = NEW.dataset AND d.company = NEW.company FOR KEY SHARE;
  IF NOT FOUND THEN
    RAISE foreign_key_violation
      USING MESSAGE = format('dataset_row names no dataset %s of company %s', NEW.dataset, NEW.company);
  END IF;
  PERFORM 1 FROM "app_user" u WHERE u.id = NEW.owner FOR KEY SHARE;
  IF NOT FOUND THEN
    RAISE foreign_key_violation USING MESSAGE = format('dataset_row names no owner %s', NEW.owner);
  END IF;
  IF NEW.team IS NOT NULL THEN
    PERFORM 1 FROM "team" m WHERE m.id = NEW.team FOR KEY SHARE;
    IF NOT FOUND THEN
      RAISE foreign_key_violation USING MESSAGE = format('dataset_row names no team %s', NEW.team);
    END IF;
  END IF;
  RETURN NULL;
END $fn$""",
    """CREATE OR REPLACE FUNCTION "dataset_row_references_gone"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_TABLE_NAME = 'dataset_definition' THEN
    DELETE FROM "dataset_row" WHERE "dataset" IN (SELECT id FROM gone);
  ELSIF TG_TABLE_NAME = 'app_user' THEN
    DELETE FROM "dataset_row" WHERE "owner" IN (SELECT id FROM gone);
  ELSIF TG_TABLE_NAME = 'team' THEN
    DELETE FROM "dataset_row" WHERE "team" IN (SELECT id FROM gone);
  END IF;
  RETURN NULL;
END $fn$""",
    'ALTER TABLE "dataset_row" DROP CONSTRAINT IF EXISTS "dataset_row_company_fkey", '
    'DROP CONSTRAINT IF EXISTS "dataset_row_dataset_fkey", DROP CONSTRAINT IF EXISTS "dataset_row_owner_fkey", '
    'DROP CONSTRAINT IF EXISTS "dataset_row_team_fkey"',
    'DROP TRIGGER IF EXISTS "dataset_row_inserted" ON "dataset_row"',
    'CREATE TRIGGER "dataset_row_inserted" AFTER INSERT ON "dataset_row" REFERENCING NEW TABLE AS new_rows '
    'FOR EACH STATEMENT EXECUTE FUNCTION "dataset_row_references"()',
    'DROP TRIGGER IF EXISTS "dataset_row_updated" ON "dataset_row"',
    # an UPDATE: only a row whose references change is checked (an import's or a sync's upsert keeps them:
    # the condition is evaluated in C, no function called), as a FOREIGN KEY skips an unchanged key
    'CREATE TRIGGER "dataset_row_updated" AFTER UPDATE ON "dataset_row" FOR EACH ROW '
    'WHEN ((OLD."company", OLD."dataset", OLD."owner", OLD."team") IS DISTINCT FROM '
    '(NEW."company", NEW."dataset", NEW."owner", NEW."team")) '
    'EXECUTE FUNCTION "dataset_row_references_changed"()',
    *(
        statement
        for parent in ("dataset_definition", "app_user", "team")
        for statement in (
            f'DROP TRIGGER IF EXISTS "dataset_row_references_gone" ON "{parent}"',
            f'CREATE TRIGGER "dataset_row_references_gone" AFTER DELETE ON "{parent}" '
            'REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION "dataset_row_references_gone"()',
        )
    ),
]


async def _apply() -> None:
    engine = engine_finder()
    assert engine is not None
    statements = INDEXES + (REFERENCE_CHECKS if isinstance(engine, PostgresEngine) else [])
    for statement in statements:
        await engine.run_querystring(QueryString(statement))


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_apply)
    return manager
