from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from litestar import Controller, get, post
from litestar.di import Provide
from litestar.params import Parameter

from backend.audit import service as audit
from backend.audit.schemas import AuditEntryInfo
from backend.contract import DATE_TIME, iso_datetime
from backend.runs import read, service, stats
from backend.runs.schemas import (
    ApproveBody,
    ProposalBody,
    ReasonBody,
    RevisionBody,
    RunDetail,
    RunPage,
    RunStats,
)
from backend.runs.sources import run_sources
from backend.runs.tables import RunStatus
from backend.runs.watch import watch
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext

MAX_WAIT_SECONDS = 25  # a long wait is asked again: the caller's token is checked at each ask


class RunsController(Controller):
    path = "/api/runs"
    tags = ["runs"]
    dependencies = {"user": Provide(provide_user)}

    @post("/", status_code=201, opt=ASSISTANT_OK)
    async def propose(self, user: UserContext, data: ProposalBody) -> RunDetail:
        return await service.propose(
            user,
            conversation_id=data.conversation_id,
            title=data.title,
            plan=data.plan,
            code=data.code,
            datasets=data.datasets,
            file_ids=data.files,
            limits=data.limits.model_dump(exclude_none=True) if data.limits else None,
            followup_of=data.followup_of,
        )

    @get("/", opt=ASSISTANT_OK)
    async def list_runs(
        self,
        user: UserContext,
        user_email: str | None = Parameter(default=None, query="user"),
        status: RunStatus | None = None,
        dataset: str | None = None,
        since: str | None = Parameter(default=None, schema_extra=DATE_TIME),
        until: str | None = Parameter(default=None, schema_extra=DATE_TIME),
        limit: int = Parameter(default=50, ge=1, le=500),
        offset: int = Parameter(default=0, ge=0),
    ) -> RunPage:
        return await read.list_runs(
            user,
            user=user_email,
            status=status,
            dataset=dataset,
            since=iso_datetime(since, "since"),
            until=iso_datetime(until, "until"),
            limit=limit,
            offset=offset,
        )

    @get("/stats", opt=ASSISTANT_OK)
    async def run_stats(self, user: UserContext, days: int = Parameter(default=30, ge=1, le=366)) -> RunStats:
        """Runs per day by status and the median VM start and duration per day, over the runs the caller may
        list (the company's for an admin or auditor, one's own otherwise): the runs page's charts."""
        return await stats.run_stats(user, days)

    @get("/{run_id:int}", opt=ASSISTANT_OK)
    async def detail(
        self,
        user: UserContext,
        run_id: int,
        wait_seconds: int = Parameter(default=0, ge=0, le=MAX_WAIT_SECONDS),
        seen_status: RunStatus | None = None,
    ) -> RunDetail:
        """With `wait_seconds`, answers once the run's status is no longer `seen_status` (by default, its
        status now) or when the time is up, whichever comes first: a waiting client costs one shared status
        query a tick (`runs.watch`), not a read of the whole run."""
        row = await read.get_run_row(user, run_id)  # a run the caller may not see is refused at once
        if wait_seconds and row["status"] == (seen_status or row["status"]):
            with contextlib.suppress(TimeoutError):  # the time is up: answer with the run as it is
                async with asyncio.timeout(wait_seconds):
                    await watch().wait(run_id, row["status"])
            # read again after the wait, the company's row with it (the one read with the token is as old as
            # the request)
            return await read.detail(replace(user, company=None), run_id)
        return await read.present(user, row)

    @post("/{run_id:int}/approve", status_code=200)
    async def approve(self, user: UserContext, run_id: int, data: ApproveBody) -> RunDetail:
        return await service.approve(
            user, run_id, code_sha256=data.code_sha256, bundle_sha256=data.bundle_sha256
        )

    @post("/{run_id:int}/reject", status_code=200)
    async def reject(self, user: UserContext, run_id: int, data: ReasonBody | None = None) -> RunDetail:
        return await service.reject(user, run_id, (data or ReasonBody()).reason)

    @post("/{run_id:int}/revisions", status_code=201, opt=ASSISTANT_OK)
    async def revise(self, user: UserContext, run_id: int, data: RevisionBody) -> RunDetail:
        return await service.revise(user, run_id, code=data.code, plan=data.plan)

    @get("/{run_id:int}/audit", opt=ASSISTANT_OK)
    async def run_audit(self, user: UserContext, run_id: int) -> list[AuditEntryInfo]:
        """The run's entries; the values and output names they carry only to whoever may see what the run
        made (the run detail's rule: not an auditor on someone else's run, nor a requester who lost a
        permission its sources need)."""
        row = await read.get_run_row(user, run_id)
        contents = read.contents_withheld(user, row, await run_sources(row)) is None
        entries = await audit.search(user.company_id, subject_type="run", subject_id=str(run_id), limit=500)
        shown = (AuditEntryInfo.of(e, contents=contents) for e in entries)
        return sorted(shown, key=lambda e: e.seq)
