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


class AuditVerification(BaseModel):
    ok: bool
    scope: Literal["company"] = "company"
    checked: int
    first_bad_seq: int | None
    reason: str | None
    head_hash: str | None  # the company chain's head
