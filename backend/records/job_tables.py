"""Imports and syncs of company-defined datasets as background jobs (records/jobs.py): one row a job."""

from __future__ import annotations

from piccolo.columns import Boolean, ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company, User


class DatasetJob(Table):
    company = ForeignKey(references=Company, null=False, index=True)
    started_by = ForeignKey(references=User, null=False)  # the person whose decision it is (a session)
    session_id = Integer(null=True, default=None)  # the session they started it from (audit: how)
    dataset_name = Varchar(length=63)
    kind = Varchar(length=10)  # import | sync
    dry_run = Boolean(default=False)
    status = Varchar(length=10, default="queued", index=True)  # queued | running | done | failed
    # the uploaded file, kept in the data directory until the job ends (then removed), and what it was
    file_path = Text(default="")
    filename = Varchar(length=255, default="")
    file_sha256 = Varchar(length=64, default="")
    new_dataset = Text(default="")  # JSON: the dataset to define from the file (its confirmed columns)
    rows_read = Integer(default=0)  # final count once ended; while running, the progress file says
    rows_total = Integer(null=True, default=None)  # when known (an earlier dry run of the same file)
    report = Text(default="")  # JSON: the import's (or sync's) report, once done
    error = Text(default="")  # why it failed, in words (never a connection string: records/sync.py)
    error_code = Varchar(length=40, default="")
    worker = Varchar(length=64, default="")  # the process running it (pid:start time), for recovery
    created_at = Timestamptz()
    started_at = Timestamptz(null=True, default=None)
    ended_at = Timestamptz(null=True, default=None)


TABLES = [DatasetJob]
