"""Audit hash form 2 (issue 52, D-H1 and D-L6): entries get `hash_form` (1 for every entry already written:
they keep verifying by the formula they were hashed with), `salt` and `body_hash` (form 2 only), and
`company_seq`, each company's own 1, 2, 3 … (the next migration numbers the entries already written).
Written by hand; additive."""

from piccolo.apps.migrations.auto.migration_manager import MigrationManager
from piccolo.columns.column_types import BigInt, Integer, Varchar

from backend.migrations._columns import add_columns, params

ID = "2026-12-06T04:12:07:000000"
VERSION = "1.38.0"
DESCRIPTION = "audit hash form 2: salted content digests, per-company sequence"

COLUMNS = [
    ("AuditEntry", "audit_entry", "hash_form", Integer, params(1)),
    ("AuditEntry", "audit_entry", "salt", Varchar, params(None, null=True, length=32)),
    ("AuditEntry", "audit_entry", "body_hash", Varchar, params(None, null=True, length=64)),
    ("AuditEntry", "audit_entry", "company_seq", BigInt, params(None, null=True)),
]


async def forwards() -> MigrationManager:
    return add_columns(ID, DESCRIPTION, COLUMNS)
