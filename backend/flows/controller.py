from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import Provide
from litestar.params import Parameter

from backend.audit import service as audit
from backend.audit.schemas import AuditEntryInfo
from backend.flows import service
from backend.flows.schemas import FlowApproveBody, FlowBody, FlowDetail, FlowPage
from backend.flows.tables import FlowStatus
from backend.runs.schemas import ReasonBody
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class FlowsController(Controller):
    path = "/api/flows"
    tags = ["flows"]
    dependencies = {"user": Provide(provide_user)}

    @post("/", status_code=201, opt=ASSISTANT_OK)
    async def propose(self, user: UserContext, data: FlowBody) -> FlowDetail:
        return await service.propose(user, data)

    @get("/", opt=ASSISTANT_OK)
    async def list_flows(
        self,
        user: UserContext,
        status: FlowStatus | None = None,
        limit: int = Parameter(default=50, ge=1, le=500),
        offset: int = Parameter(default=0, ge=0),
    ) -> FlowPage:
        return await service.list_flows(user, status=status, limit=limit, offset=offset)

    @get("/{flow_id:int}", opt=ASSISTANT_OK)
    async def detail(self, user: UserContext, flow_id: int) -> FlowDetail:
        return await service.flow_detail(user, flow_id)

    @post("/{flow_id:int}/approve", status_code=200)
    async def approve(self, user: UserContext, flow_id: int, data: FlowApproveBody) -> FlowDetail:
        return await service.approve(user, flow_id, data.steps)

    @post("/{flow_id:int}/reject", status_code=200)
    async def reject(self, user: UserContext, flow_id: int, data: ReasonBody | None = None) -> FlowDetail:
        return await service.reject(user, flow_id, (data or ReasonBody()).reason)

    @get("/{flow_id:int}/audit", opt=ASSISTANT_OK)
    async def flow_audit(self, user: UserContext, flow_id: int) -> list[AuditEntryInfo]:
        """The flow's entries; what its steps handed on (names, hashes) only to whoever may see what its
        steps made (the run detail's rule over every step's sources)."""
        row = await service.get_flow_row(user, flow_id)
        contents = await service.contents_withheld_of_flow(user, row) is None
        entries = await audit.search(user.company_id, subject_type="flow", subject_id=str(flow_id), limit=500)
        shown = (AuditEntryInfo.of(e, contents=contents) for e in entries)
        return sorted(shown, key=lambda e: e.seq)
