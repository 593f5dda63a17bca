"""Follow-up grants: how many follow-ups an approval has let through (claimed atomically), and why a
follow-up fell back to normal approval. Written by hand (small, additive)."""

from piccolo.columns.column_types import Integer, Text

from backend.migrations._columns import add_columns, params

ID = "2026-11-30T21:34:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "follow-up grant use count and fallback note"

COLUMNS = [
    ("Run", "run", "followup_grant_used", Integer, params(0)),
    ("Run", "run", "followup_note", Text, params(None, null=True)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
