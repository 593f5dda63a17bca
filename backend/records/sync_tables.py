"""Where a company-defined dataset syncs from (records/sync.py): one read-only PostgreSQL source per dataset."""

from __future__ import annotations

from piccolo.columns import ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.records.tables import DatasetDefinition
from backend.tenancy.tables import Company, User


class DatasetSource(Table):
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


TABLES = [DatasetSource]
