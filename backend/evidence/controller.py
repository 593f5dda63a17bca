"""GET /api/runs/{id}/evidence (JSON) and /evidence/html (a page that prints): for whoever may see the run."""

from __future__ import annotations

from typing import Any

from litestar import Controller, MediaType, Response, get
from litestar.di import Provide
from pydantic import BaseModel

from backend.evidence import html, service
from backend.tenancy.auth import provide_user
from backend.tenancy.context import UserContext


class EvidencePack(BaseModel):
    format: int
    run: dict[str, Any]
    revisions: list[dict[str, Any]]
    manifest: dict[str, Any]
    warnings_at_approval: list[dict[str, Any]]
    approval: dict[str, Any] | None
    rejection: dict[str, Any] | None
    isolation: dict[str, Any]
    outputs: list[dict[str, Any]]
    rejected_outputs: list[dict[str, Any]]
    action_items: list[dict[str, Any]]
    actions_discarded: bool
    credits_charged: float | None
    audit_entries: list[dict[str, Any]]


class EvidenceController(Controller):
    path = "/api/runs"
    tags = ["runs"]
    dependencies = {"user": Provide(provide_user)}

    @get("/{run_id:int}/evidence")
    async def evidence(self, user: UserContext, run_id: int) -> EvidencePack:
        return EvidencePack(**await service.pack(user, run_id))

    @get("/{run_id:int}/evidence/html", media_type=MediaType.HTML)
    async def evidence_html(self, user: UserContext, run_id: int) -> Response[str]:
        page = html.render(await service.pack(user, run_id))
        return Response(
            page,
            media_type=MediaType.HTML,
            headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"},
        )
