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
    # 1: the hash covers `data` verbatim (entries written before form 2). 2: record and output contents
    # (CONTENT_KEYS) enter as sha256(salt || canonical contents), so an export may hold the digest instead of
    # the values and still verify; the entry's own facts and company link hash to `body_hash`, which the
    # global `hash` covers with `seq` and `prev_hash` (a company's view needs neither). A chain changes form
    # once, at its first form-2 entry.
    hash_form = Integer(default=1)
    salt = Varchar(length=32, null=True, default=None)  # hex, form 2
    body_hash = Varchar(length=64, null=True, default=None)  # form 2: what the company's chain links to
    # 1, 2, 3 … within the company (its views show this, never the global seq)
    company_seq = BigInt(null=True, default=None)


TABLES = [AuditEntry]
