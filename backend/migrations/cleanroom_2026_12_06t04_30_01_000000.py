"""The platform's own idempotency key, a plain column again beside the unique `token_key` (issue 52, D-L4;
the previous migration renamed the unique column, the next fills both)."""

from piccolo.columns.column_types import Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T04:30:01:000000"
VERSION = "1.38.0"
DESCRIPTION = "platform charges: the platform's idempotency key as a plain column"


async def forwards():
    return add_columns(
        ID,
        DESCRIPTION,
        [("PlatformCharge", "platform_charge", "idempotency_key", Varchar, params("", length=200))],
    )
