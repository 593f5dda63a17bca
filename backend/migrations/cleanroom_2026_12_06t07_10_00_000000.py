"""Imports and syncs as background jobs (`records.job_tables.DatasetJob`, issue 54): a frozen copy of the table
as it was when this was written, created with the engine's own DDL."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns import Boolean, ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.engine.finder import engine_finder
from piccolo.table import Table


class Company(Table, tablename="company"):
    pass


class User(Table, tablename="app_user"):
    pass


ID = "2026-12-06T07:10:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "dataset_job: imports and syncs of company-defined datasets run as background jobs"


class DatasetJob(Table, tablename="dataset_job"):
    company = ForeignKey(references=Company, null=False, index=True)
    started_by = ForeignKey(references=User, null=False)
    session_id = Integer(null=True, default=None)
    dataset_name = Varchar(length=63)
    kind = Varchar(length=10)
    dry_run = Boolean(default=False)
    status = Varchar(length=10, default="queued", index=True)
    file_path = Text(default="")
    filename = Varchar(length=255, default="")
    file_sha256 = Varchar(length=64, default="")
    new_dataset = Text(default="")
    rows_read = Integer(default=0)
    rows_total = Integer(null=True, default=None)
    report = Text(default="")
    error = Text(default="")
    error_code = Varchar(length=40, default="")
    worker = Varchar(length=64, default="")
    created_at = Timestamptz()
    started_at = Timestamptz(null=True, default=None)
    ended_at = Timestamptz(null=True, default=None)


async def _create() -> None:
    engine = engine_finder()
    assert engine is not None
    for table in (Company, User, DatasetJob):
        table._meta.db = engine  # the database being migrated, not the one found when this module loaded
    await DatasetJob.create_table(if_not_exists=True)


async def forwards():
    manager = MigrationManager(migration_id=ID, app_name="cleanroom", description=DESCRIPTION)
    manager.add_raw(_create)
    return manager
