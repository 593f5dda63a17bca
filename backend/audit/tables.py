from __future__ import annotations

from piccolo.columns import JSON, BigInt, Integer, Timestamptz, Varchar
from piccolo.table import Table


class AuditEntry(Table):
    seq = BigInt(unique=True, index=True)  # 1, 2, 3 … without gaps
    at = Timestamptz()
    company_id = Integer(null=True, default=None, index=True)
    actor = Varchar(length=254)  # an email, "assistant:<email>", or "system"
    action = Varchar(length=60, index=True)
    subject_type = Varchar(length=40, default="")
    subject_id = Varchar(length=64, default="")
    data = JSON(default={})
    prev_hash = Varchar(length=64)
    # the hash of this company's previous entry (GENESIS for its first): the company's own chain
    company_prev_hash = Varchar(length=64, null=True, default=None)
    hash = Varchar(length=64)


TABLES = [AuditEntry]
