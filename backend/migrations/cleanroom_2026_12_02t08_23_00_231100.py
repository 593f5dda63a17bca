"""Fleet: the host a run was dispatched to, so that only that host's worker may claim it. Written by hand
(small, additive)."""

from piccolo.columns.column_types import Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-12-02T08:23:00:231100"
VERSION = "1.38.0"
DESCRIPTION = "run dispatched_to"

COLUMNS = [
    ("Run", "run", "dispatched_to", Varchar, params(None, null=True, length=64)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
