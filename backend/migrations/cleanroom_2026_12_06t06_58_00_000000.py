"""The id of the API request that proposed a run (X-Request-Id, backend/observe.py), which its worker logs under.
Written by hand (small, additive)."""

from piccolo.columns.column_types import Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T06:58:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "run.request_id: the proposing request's id, for the worker's log lines"

COLUMNS = [
    ("Run", "run", "request_id", Varchar, params(None, null=True, length=64)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
