"""Drive's trash (issue 54): a deleted file keeps its row with `trashed_at` until it is restored or purged.
Written by hand (one additive column)."""

from piccolo.columns.column_types import Timestamptz

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T04:51:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "Drive trash: when a file was deleted"

COLUMNS = [
    ("DriveFile", "drive_file", "trashed_at", Timestamptz, params(None, null=True, index=True)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
