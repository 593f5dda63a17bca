"""The company admin's and auditor's check of the audit trail: verify their own company's entries, and the
public key that signs exports (browsing and exporting, which need the record visibility rules, are
backend/review's). It sits with the company's other admin handlers (tenancy), not in `audit`, which every
package writes to: the log must not depend on who reads it over HTTP."""

from __future__ import annotations

import asyncio

from litestar import Controller, get, post
from litestar.di import Provide

from backend.audit import service, signing
from backend.audit.schemas import AuditPublicKey, AuditVerification
from backend.errors import Forbidden
from backend.tenancy.auth import AUDITOR_OK, provide_user
from backend.tenancy.context import UserContext


class AuditController(Controller):
    path = "/api/audit"
    tags = ["audit"]
    dependencies = {"user": Provide(provide_user)}

    @post("/verify", status_code=200, opt=AUDITOR_OK)
    async def verify(self, user: UserContext) -> AuditVerification:
        """The caller's company's own chain only, every entry also against the anchor outside the database: no
        global count or head, no reading other companies' entries. The whole chain is the operator's check:
        `cleanroom audit verify`."""
        if not user.sees_company_history:
            raise Forbidden("only a company admin or an auditor can verify the audit chain")
        result = await service.verify_company(user.company_id)
        return AuditVerification(
            ok=result.ok,
            checked=result.checked,
            first_bad_seq=result.first_bad_seq,
            reason=result.reason,
            head_hash=result.head_hash,
        )

    @get("/public-key")
    async def public_key(self) -> AuditPublicKey:
        """The public half of the key that signs audit exports (kept outside the database), without signing
        in: whoever checks an export pins it (scripts/verify_audit_export.py --public-key)."""
        return AuditPublicKey(
            algorithm=signing.ALGORITHM,
            public_key=await asyncio.to_thread(signing.public_text),
            fingerprint=signing.fingerprint(),
        )
