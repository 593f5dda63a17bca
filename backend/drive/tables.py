from __future__ import annotations

from piccolo.columns import JSON, BigInt, ForeignKey, Integer, Timestamptz, Varchar
from piccolo.table import Table

from backend.records.tables import RecordColumns


class DriveFolder(RecordColumns, Table):
    name = Varchar(length=200)
    parent_id = BigInt(null=True, default=None)
    run_id = Integer(null=True, default=None)  # set for the folder holding a run's outputs
    source_datasets = JSON(default=[])  # a run's output: readable only with read on every one of these


class DriveFile(RecordColumns, Table):
    folder = ForeignKey(references=DriveFolder, null=True, default=None)
    name = Varchar(length=255)
    size = BigInt()
    sha256 = Varchar(length=64, index=True)
    kind = Varchar(
        length=20
    )  # sniffed from content: xlsx, ods, csv, pdf, image, text, markdown, json, binary
    run_id = Integer(null=True, default=None)
    source_datasets = JSON(default=[])  # a run's output: readable only with read on every one of these
    # set when the owner deletes it: in the trash, seen by nobody but its owner (and admins) in the trash
    # listing, restorable for TRASH_DAYS, then purged (row and, when no other file has its content, blob)
    trashed_at = Timestamptz(null=True, default=None, index=True)


TABLES = [DriveFolder, DriveFile]
