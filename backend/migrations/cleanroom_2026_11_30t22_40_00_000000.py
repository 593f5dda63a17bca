"""Who approved a run, as a kind (person, followup, schedule) instead of a prefix of `approved_by`.
Written by hand (small, additive); the next migration fills it in for runs approved before it."""

from piccolo.columns.column_types import Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-11-30T22:40:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "run approval kind"

COLUMNS = [
    ("Run", "run", "approval_kind", Varchar, params(None, null=True, length=10)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
