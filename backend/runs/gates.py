"""The gates, in order: the assistant's write ability (else the feature is absent) → the company switch."""

from __future__ import annotations

from typing import Any

from backend.errors import Forbidden, NotFound
from backend.tenancy.tables import Company


async def company(company_id: int) -> dict[str, Any]:
    row = await Company.select().where(Company.id == company_id).first()
    assert row is not None
    return row


async def require_feature(company_id: int) -> dict[str, Any]:
    """With the assistant's ability to write turned off, code runs do not exist for this company."""
    row = await company(company_id)
    if not row["assistant_write_enabled"]:
        raise NotFound("not found", code="not_found")
    return row


async def require_code_execution(company_id: int) -> dict[str, Any]:
    row = await require_feature(company_id)
    if not row["code_execution_enabled"]:
        raise Forbidden(
            "code execution is turned off for this company (it ships off); a company admin can turn it on in Settings",
            code="code_execution_disabled",
        )
    return row
