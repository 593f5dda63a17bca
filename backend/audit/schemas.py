"""What the audit endpoints return."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel


class AuditEntryInfo(BaseModel):
    seq: int  # the company's own 1, 2, 3 … (company_seq): never the global seq, whose gaps count the others'
    at: datetime
    company_id: int | None
    actor: str  # an email, "assistant:<email> (token N)", or "system"
    action: str
    subject_type: str
    subject_id: str
    data: dict[str, Any]  # what the action recorded; its keys depend on the action
    company_prev_hash: str | None  # the company's previous entry's hash: the company's own chain
    hash: str  # what the company's next entry links to (a form-2 entry's body hash; no global field in it)
    data_withheld: list[str] = []  # keys of `data` holding record or output contents not shown (an auditor's)

    @classmethod
    def of(cls, row: dict[str, Any], *, contents: bool = True) -> AuditEntryInfo:
        """An entry as a company browses it: its company's numbering and chain, no global seq, row id or
        `prev_hash` (another company's entry's hash). Without `contents` (an auditor) the values a run or a
        proposed change carried are left out and named in `data_withheld` (the hash still covers them, as a
        salted digest since hash form 2)."""
        shown = {
            **row,
            "seq": row["company_seq"] if row.get("company_seq") is not None else row["seq"],
            "hash": row["body_hash"] if (row.get("hash_form") or 1) >= 2 else row["hash"],
        }
        if contents or not isinstance(row.get("data"), dict):
            return cls(**shown)
        data = row["data"]
        withheld = sorted(k for k in data if k in CONTENT_KEYS)
        return cls(
            **{**shown, "data": {k: v for k, v in data.items() if k not in CONTENT_KEYS}},
            data_withheld=withheld,
        )


# what an entry carries that is a record's or a run's contents, not a fact about them: proposed values, a
# record before, printed output, staged excerpts, a raw actions.json entry, and the names, hashes and
# reasons of what a run wrote, was refused or was handed (its code chose them, so they can carry data:
# `run.finished`, `run.rerun_finished`, `flow.step_handed`, a run output's `drive.uploaded`)
VALUE_KEYS = ("changes", "before", "stdout", "stderr", "excerpt", "raw")
OUTPUT_KEYS = ("outputs", "rejected_files", "carried", "files")
CONTENT_KEYS = (*VALUE_KEYS, *OUTPUT_KEYS)


class AuditVerification(BaseModel):
    ok: bool
    scope: Literal["company"] = "company"
    checked: int
    first_bad_seq: int | None
    reason: str | None
    head_hash: str | None  # the company chain's head


class AuditPublicKey(BaseModel):
    algorithm: Literal["ed25519"]
    public_key: str  # the 32 raw bytes, base64: what scripts/verify_audit_export.py --public-key takes
    fingerprint: str  # sha256 of the raw key, hex, first 32 digits: what the console and each export name
