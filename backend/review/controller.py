"""GET /api/audit (the trail, filtered), /api/audit/export (signed; an auditor's holds the values they may
read, digests elsewhere), /api/audit/runs/{id}/timeline and /api/audit/reports/...: for a company admin or an
auditor, their own company's only. Reads: an auditor's session and tokens reach them."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import Provide
from litestar.params import Parameter
from litestar.response import Stream

from backend.audit import export
from backend.audit import service as audit
from backend.audit.export import parse_bound
from backend.audit.schemas import AuditEntryInfo
from backend.errors import Forbidden
from backend.review import service
from backend.review.schemas import (
    AcceptedPerPerson,
    ApprovedDespiteWarning,
    FindingsOnDay,
    RejectionRate,
    RunTimeline,
    ScheduleReads,
    UnreviewedFollowup,
)
from backend.tenancy.auth import provide_user
from backend.tenancy.context import UserContext

# a date or a date-time, as the document says (the service refuses anything else, 422)
_DAY_OR_TIME = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}]}
SINCE = Parameter(
    query="from",
    default=None,
    description="ISO date or date-time (UTC when no zone)",
    schema_extra=_DAY_OR_TIME,
)
UNTIL = Parameter(
    query="to",
    default=None,
    description="ISO date (through that day) or date-time",
    schema_extra=_DAY_OR_TIME,
)


class ReviewController(Controller):
    path = "/api/audit"
    tags = ["audit"]
    dependencies = {"user": Provide(provide_user)}

    @get("/")
    async def list_entries(
        self,
        user: UserContext,
        q: str | None = None,
        action: str | None = None,
        subject_type: str | None = None,
        subject_id: str | None = None,
        person: str | None = Parameter(
            default=None, description="a person's email: in a session or by token"
        ),
        run: int | None = Parameter(default=None, description="a run: its entries and its action items'"),
        flow: int | None = Parameter(
            default=None, description="a flow: its own, its steps' and their items'"
        ),
        dataset: str | None = Parameter(
            default=None, description="runs that staged it, changes to its records"
        ),
        since: str | None = SINCE,
        until: str | None = UNTIL,
        limit: int = Parameter(default=200, ge=1, le=1000),
        offset: int = Parameter(default=0, ge=0),
    ) -> list[AuditEntryInfo]:
        rows = await service.entries(
            user,
            q=q,
            action=action,
            subject_type=subject_type,
            subject_id=subject_id,
            person=person,
            run_id=run,
            flow_id=flow,
            dataset=dataset,
            since=parse_bound(since, end=False),
            until=parse_bound(until, end=True),
            limit=limit,
            offset=offset,
        )
        return [AuditEntryInfo.of(row, contents=not user.is_auditor) for row in rows]

    @get("/export", media_type=export.MEDIA_TYPE)
    async def export_entries(
        self, user: UserContext, since: str | None = SINCE, until: str | None = UNTIL
    ) -> Stream:
        """The company's entries as JSON Lines with the chain's start and head, every entry checked against
        the anchor, the footer signed, streamed; `from` and `to` are ISO dates or date-times (a date as `to`
        includes that day). An auditor gets the values of the entries whose record they may read (the rules
        of the other views), the digest of the others. Checked offline, with no database, by
        scripts/verify_audit_export.py --public-key. The export itself is audited (after the last exported
        entry)."""
        if not user.sees_company_history:
            raise Forbidden("only a company admin or an auditor can export the audit trail")
        plan = await export.plan(user.company_id, parse_bound(since, end=False), parse_bound(until, end=True))
        await audit.record(
            "audit.exported",
            actor=user.actor,
            company_id=user.company_id,
            subject_type="audit",
            data={"from": since, "to": until, "first": plan.first_shown, "last": plan.last_shown},
        )
        return Stream(
            export.lines(plan, service.export_reveal(user)),
            media_type=export.MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{export.filename(plan)}"'},
        )

    @get("/runs/{run_id:int}/timeline")
    async def run_timeline(self, user: UserContext, run_id: int) -> RunTimeline:
        return await service.timeline(user, run_id)

    @get("/reports/approved-despite-warning")
    async def approved_despite_warning(
        self, user: UserContext, since: str | None = SINCE, until: str | None = UNTIL
    ) -> list[ApprovedDespiteWarning]:
        return await service.approved_despite_warning(
            user, parse_bound(since, end=False), parse_bound(until, end=True)
        )

    @get("/reports/unreviewed-followups")
    async def unreviewed_followups(
        self, user: UserContext, since: str | None = SINCE, until: str | None = UNTIL
    ) -> list[UnreviewedFollowup]:
        return await service.unreviewed_followups(
            user, parse_bound(since, end=False), parse_bound(until, end=True)
        )

    @get("/reports/accepted-per-person")
    async def accepted_per_person(
        self, user: UserContext, since: str | None = SINCE, until: str | None = UNTIL
    ) -> list[AcceptedPerPerson]:
        return await service.accepted_per_person(
            user, parse_bound(since, end=False), parse_bound(until, end=True)
        )

    @get("/reports/rejection-rate")
    async def rejection_rate(
        self, user: UserContext, since: str | None = SINCE, until: str | None = UNTIL
    ) -> list[RejectionRate]:
        return await service.rejection_rate(user, parse_bound(since, end=False), parse_bound(until, end=True))

    @get("/reports/findings-over-time")
    async def findings_over_time(
        self, user: UserContext, since: str | None = SINCE, until: str | None = UNTIL
    ) -> list[FindingsOnDay]:
        return await service.findings_over_time(
            user, parse_bound(since, end=False), parse_bound(until, end=True)
        )

    @get("/reports/schedules")
    async def schedules(self, user: UserContext) -> list[ScheduleReads]:
        return await service.schedule_reads(user)
