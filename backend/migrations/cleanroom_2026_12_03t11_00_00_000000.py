"""A run's staged bytes stored with it (issue 30): the limits on staged data summed the manifests of every
run in flight, decoding each, four times per proposal. Written by hand: one column; the next migration fills
it for the runs made before it (Piccolo runs a migration's raw steps before its new columns)."""

from piccolo.columns.column_types import BigInt

from backend.migrations._columns import add_columns, params

ID = "2026-12-03T11:00:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "a run's staged bytes, stored when it is made"


async def forwards():
    return add_columns(ID, DESCRIPTION, [("Run", "run", "staged_bytes", BigInt, params(0))])
