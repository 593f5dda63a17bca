"""The injection warnings' tables (issue 55): the verdict cache (verdict_store.py) and the admins'
acknowledgements of findings (backend/runs/acknowledge.py). Both are per company."""

from __future__ import annotations

from piccolo.columns import ForeignKey, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company


class InjectionVerdict(Table):
    """One distinct cell's judgement (verdicts.encode, JSON) under one scanner fingerprint. Unique on
    (company, cell_sha256, fingerprint); pruned by verdict_store.prune (age and a per-company cap)."""

    company = ForeignKey(references=Company, null=False)
    cell_sha256 = Varchar(length=64)
    fingerprint = Varchar(length=64)
    verdict = Text()
    stored_at = Timestamptz()


class InjectionAcknowledgement(Table):
    """An admin's "expected here" for the findings of one cell (by its sha256) in one column ("" for a line
    of text). Unique on (company, cell_sha256, column_name)."""

    company = ForeignKey(references=Company, null=False)
    cell_sha256 = Varchar(length=64)
    column_name = Text(default="")
    reason = Text()
    acknowledged_by = Varchar(length=320)
    acknowledged_at = Timestamptz()


# composite indexes (Piccolo's definitions cannot say them): made by the migration and by
# db.create_tables_without_migrations
EXTRA_INDEXES = [
    'CREATE UNIQUE INDEX IF NOT EXISTS "injection_verdict_key" '
    'ON "injection_verdict" ("company", "cell_sha256", "fingerprint")',
    'CREATE INDEX IF NOT EXISTS "injection_verdict_age" ON "injection_verdict" ("company", "stored_at")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "injection_acknowledgement_key" '
    'ON "injection_acknowledgement" ("company", "cell_sha256", "column_name")',
]

TABLES = [InjectionVerdict, InjectionAcknowledgement]
