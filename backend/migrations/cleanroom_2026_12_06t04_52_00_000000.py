"""The sync sources of company-defined datasets (`records.sync_tables.DatasetSource`, issue 54): a frozen copy of
the table as it was when this was written, created with the engine's own DDL."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns import ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.engine.finder import engine_finder
from piccolo.table import Table


# the referenced tables as this migration sees them: only their names (and Piccolo's serial id) matter here
class Company(Table, tablename="company"):
    pass


class User(Table, tablename="app_user"):
    pass


class DatasetDefinition(Table, tablename="dataset_definition"):
    pass


ID = "2026-12-06T04:52:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "dataset_source: where a company-defined dataset syncs from"


class DatasetSource(Table, tablename="dataset_source"):
    company = ForeignKey(references=Company, null=False, index=True)
    dataset = ForeignKey(references=DatasetDefinition, null=False, unique=True)
    owner = ForeignKey(references=User, null=False)  # new rows' owner (who set the source up)
    # the connection string, encrypted (records/sync.py `seal`): never returned, logged or audited
    dsn_sealed = Text()
    query = Text(default="")  # a SELECT, or empty when `source_table` names a table
    source_table = Varchar(length=200, default="")
    updated_at_column = Varchar(length=63, default="")  # empty: every sync reads every row
    cursor = Varchar(length=64, default="")  # the largest updated-at value synced so far (ISO)
    cron = Varchar(length=100, default="")  # empty: on demand only
    timezone = Varchar(length=64, default="UTC")
    next_sync_at = Timestamptz(null=True, default=None)
    status = Varchar(length=10, default="never")  # never | ok | failed
    last_error = Text(default="")
    last_attempt_at = Timestamptz(null=True, default=None)
    last_synced_at = Timestamptz(null=True, default=None)
    last_summary = Text(default="")  # JSON: the last good sync's counts
    version = Integer(default=1)


async def _create() -> None:
    engine = engine_finder()
    assert engine is not None
    for table in (Company, User, DatasetDefinition, DatasetSource):
        table._meta.db = engine  # the database being migrated, not the one found when this module loaded
    await DatasetSource.create_table(if_not_exists=True)


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_create)
    return manager
