from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Controller, delete, get, post
from litestar.di import Provide
from litestar.params import Parameter
from pydantic import BaseModel, Field

from backend.actions import service as actions
from backend.audit import service as audit
from backend.credits import service as credits
from backend.runs import gates, service
from backend.schedules import service as schedules
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class LimitsBody(BaseModel):
    wall_seconds: int | None = Field(default=None, ge=1)
    memory_mib: int | None = Field(default=None, ge=1)
    vcpus: int | None = Field(default=None, ge=1)


class ProposalBody(BaseModel):
    conversation_id: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=200)
    plan: str = Field(default="", max_length=20_000)
    code: str
    datasets: list[str] = Field(default_factory=list, max_length=12)
    files: list[int] = Field(default_factory=list, max_length=50)
    limits: LimitsBody | None = None
    # the person-approved run whose follow-up grant this run asks to use (same conversation); without it,
    # or outside that grant, the run waits for approval like any other
    followup_of: int | None = Field(default=None, ge=1)


class ApproveBody(BaseModel):
    """The hashes the approver saw on the approval screen; a mismatch refuses the approval."""

    code_sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")
    bundle_sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")


class ReasonBody(BaseModel):
    reason: str | None = Field(default=None, max_length=2000)


class RevisionBody(BaseModel):
    code: str
    plan: str | None = Field(default=None, max_length=20_000)


class ScheduleBody(BaseModel):
    run_id: int
    cron: str = Field(min_length=9, max_length=100)
    timezone: str = "UTC"


class RunsController(Controller):
    path = "/api/runs"
    tags = ["runs"]
    dependencies = {"user": Provide(provide_user)}

    @post("/", status_code=201, opt=ASSISTANT_OK)
    async def propose(self, user: UserContext, data: ProposalBody) -> dict[str, Any]:
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
        status: str | None = None,
        dataset: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = Parameter(default=50, ge=1, le=500),
        offset: int = Parameter(default=0, ge=0),
    ) -> dict[str, Any]:
        return await service.list_runs(
            user,
            user=user_email,
            status=status,
            dataset=dataset,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
        )

    @get("/{run_id:int}", opt=ASSISTANT_OK)
    async def detail(self, user: UserContext, run_id: int) -> dict[str, Any]:
        return await service.detail(user, run_id)

    @post("/{run_id:int}/approve", status_code=200)
    async def approve(self, user: UserContext, run_id: int, data: ApproveBody) -> dict[str, Any]:
        return await service.approve(
            user, run_id, code_sha256=data.code_sha256, bundle_sha256=data.bundle_sha256
        )

    @post("/{run_id:int}/reject", status_code=200)
    async def reject(self, user: UserContext, run_id: int, data: ReasonBody | None = None) -> dict[str, Any]:
        return await service.reject(user, run_id, (data or ReasonBody()).reason)

    @post("/{run_id:int}/revisions", status_code=201, opt=ASSISTANT_OK)
    async def revise(self, user: UserContext, run_id: int, data: RevisionBody) -> dict[str, Any]:
        return await service.revise(user, run_id, code=data.code, plan=data.plan)

    @get("/{run_id:int}/action-items", opt=ASSISTANT_OK)
    async def action_items(self, user: UserContext, run_id: int) -> list[dict[str, Any]]:
        return await actions.list_items(user, run_id)

    @get("/{run_id:int}/audit", opt=ASSISTANT_OK)
    async def run_audit(self, user: UserContext, run_id: int) -> list[dict[str, Any]]:
        await service.get_run_row(user, run_id)
        entries = await audit.search(user.company_id, subject_type="run", subject_id=str(run_id), limit=500)
        return sorted(entries, key=lambda e: e["seq"])


class ActionItemsController(Controller):
    path = "/api/action-items"
    tags = ["actions"]
    dependencies = {"user": Provide(provide_user)}

    @get("/{item_id:int}", opt=ASSISTANT_OK)
    async def get_item(self, user: UserContext, item_id: int) -> dict[str, Any]:
        await gates.require_feature(user.company_id)
        return await actions.get_item(user, item_id)

    @post("/{item_id:int}/accept", status_code=200)
    async def accept(self, user: UserContext, item_id: int) -> dict[str, Any]:
        return await actions.accept(user, item_id)

    @post("/{item_id:int}/reject", status_code=200)
    async def reject(self, user: UserContext, item_id: int, data: ReasonBody | None = None) -> dict[str, Any]:
        return await actions.reject(user, item_id, (data or ReasonBody()).reason)


class CreditsController(Controller):
    path = "/api/credits"
    tags = ["credits"]
    dependencies = {"user": Provide(provide_user)}

    @get("/", opt=ASSISTANT_OK)
    async def usage(self, user: UserContext) -> dict[str, Any]:
        data = await credits.usage(user.company_id)
        if not user.is_admin:  # members see the pool, not who spent it
            data["usage_by_user"] = [u for u in data["usage_by_user"] if u["email"] == user.email]
            data["costliest_runs"] = [r for r in data["costliest_runs"] if r["email"] == user.email]
        return data


class SchedulesController(Controller):
    path = "/api/schedules"
    tags = ["schedules"]
    dependencies = {"user": Provide(provide_user)}

    @post("/", status_code=201)
    async def create(self, user: UserContext, data: ScheduleBody) -> dict[str, Any]:
        return await schedules.create(user, data.run_id, data.cron, data.timezone)

    @get("/", opt=ASSISTANT_OK)
    async def list_schedules(self, user: UserContext) -> list[dict[str, Any]]:
        return await schedules.list_schedules(user)

    @post("/{schedule_id:int}/pause", status_code=200)
    async def pause(self, user: UserContext, schedule_id: int) -> dict[str, Any]:
        return await schedules.set_status(user, schedule_id, "paused")

    @post("/{schedule_id:int}/resume", status_code=200)
    async def resume(self, user: UserContext, schedule_id: int) -> dict[str, Any]:
        return await schedules.set_status(user, schedule_id, "active")

    @delete("/{schedule_id:int}", status_code=204)
    async def delete(self, user: UserContext, schedule_id: int) -> None:
        await schedules.delete(user, schedule_id)
