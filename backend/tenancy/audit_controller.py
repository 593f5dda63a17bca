"""The company admin's and auditor's view of the audit trail: verify and export their own company's entries
(browsing them, filtered, is backend/review's). It sits with the company's other admin handlers (tenancy),
not in `audit`, which every package writes to: the log must not depend on who reads it over HTTP."""

from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import Provide
from litestar.params import Parameter
from litestar.response import Stream

from backend.audit import export, service
from backend.audit.schemas import AuditVerification
from backend.errors import Forbidden
from backend.tenancy.auth import AUDITOR_OK, provide_user
from backend.tenancy.context import UserContext


class AuditController(Controller):
    path = "/api/audit"
    tags = ["audit"]
    dependencies = {"user": Provide(provide_user)}

    @post("/verify", status_code=200, opt=AUDITOR_OK)
    async def verify(self, user: UserContext) -> AuditVerification:
        """The caller's company's own chain only: no global count or head, no reading other companies'
        entries. The whole chain and its anchor are the operator's check: `cleanroom audit verify`."""
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

    @get("/export", media_type=export.MEDIA_TYPE)
    async def export_entries(
        self,
        user: UserContext,
        since: str | None = Parameter(query="from", default=None),
        until: str | None = Parameter(query="to", default=None),
    ) -> Stream:
        """The company's entries as JSON Lines with the chain's start, head and anchor, streamed; `from` and
        `to` are ISO dates or date-times (a date as `to` includes that day). Checked offline, with no database,
        by scripts/verify_audit_export.py. The export itself is audited (after the last exported entry)."""
        if not user.sees_company_history:
            raise Forbidden("only a company admin or an auditor can export the audit trail")
        plan = await export.plan(
            user.company_id, export.parse_bound(since, end=False), export.parse_bound(until, end=True)
        )
        await service.record(
            "audit.exported",
            actor=user.actor,
            company_id=user.company_id,
            subject_type="audit",
            data={"from": since, "to": until, "first_seq": plan.first_seq, "last_seq": plan.last_seq},
        )
        return Stream(
            export.lines(plan),
            media_type=export.MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{export.filename(plan)}"'},
        )
