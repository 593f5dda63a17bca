"""What the audit endpoints return."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel


class AuditEntryInfo(BaseModel):
    id: int
    seq: int  # 1, 2, 3 … over all companies, without gaps
    at: datetime
    company_id: int | None
    actor: str  # an email, "assistant:<email> (token N)", or "system"
    action: str
    subject_type: str
    subject_id: str
    data: dict[str, Any]  # what the action recorded; its keys depend on the action
    prev_hash: str
    company_prev_hash: str | None  # the company's previous entry's hash: the company's own chain
    hash: str
    data_withheld: list[str] = []  # keys of `data` holding record or output contents not shown (an auditor's)

    @classmethod
    def of(cls, row: dict[str, Any], *, contents: bool = True) -> AuditEntryInfo:
        """An entry as browsed; without `contents` (an auditor) the values a run or a proposed change carried
        are left out and named in `data_withheld` (the hash still covers them: the export holds them all)."""
        if contents or not isinstance(row.get("data"), dict):
            return cls(**row)
        data = row["data"]
        withheld = sorted(k for k in data if k in CONTENT_KEYS)
        return cls(
            **{**row, "data": {k: v for k, v in data.items() if k not in CONTENT_KEYS}},
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
