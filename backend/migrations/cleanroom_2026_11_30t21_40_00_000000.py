"""Each company's own audit chain: an entry also names the hash of its company's previous entry, so a
company admin verifies their company's entries without reading anyone else's. Written by hand (additive;
entries written before it keep a NULL and are checked by their own hash only)."""

from piccolo.columns.column_types import Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-11-30T21:40:00:000000"
VERSION = "1.38.0"
DESCRIPTION = "per-company audit chain link"

COLUMNS = [
    ("AuditEntry", "audit_entry", "company_prev_hash", Varchar, params(None, null=True, length=64)),
]


async def forwards():
    return add_columns(ID, DESCRIPTION, COLUMNS)
