"""GET /api/runs/{id}/evidence (JSON) and /evidence/html (a page that prints): for whoever may see the run.
POST /api/runs/{id}/reruns asks for a re-run for evidence; GET /api/runs/{id}/reruns[/{rerun_id}] shows each
re-run's comparison with the original: a company admin's or an auditor's, in a signed-in session only."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Controller, MediaType, Response, get, post
from litestar.di import Provide
from pydantic import BaseModel

from backend.evidence import html, rerun, service
from backend.tenancy.auth import AUDITOR_OK, provide_user
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
    reruns: list[dict[str, Any]] = []  # re-runs for evidence: who asked, and what matched (never charged)


class RerunFile(BaseModel):
    name: str
    original_sha256: str | None  # None: the original run wrote no such file
    rerun_sha256: str | None  # None: the re-run did not write it
    match: bool


class RerunComparison(BaseModel):
    printed_output_match: bool  # the same printed output (compared by sha256; the text is not shown here)
    status_match: bool
    exit_code_match: bool
    files: list[RerunFile]
    files_matched: int
    all_match: bool


class Rerun(BaseModel):
    id: int
    run_id: int
    status: str  # queued | running | finished | refused | error
    requested_by: str
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error_message: str | None
    outcome: dict[str, Any] | None  # the re-run VM's status, exit code, files (name, size, sha256), vm
    comparison: RerunComparison | None
    charged: bool  # always false: a re-run for evidence draws nothing from the credit pool
    credits: float


class Reruns(BaseModel):
    run_id: int
    retention_days: int  # the company's setting now (0: bundles are not kept)
    kept_until: datetime | None  # while the bundle is kept, until when
    available: bool  # whether a re-run may be asked for now
    unavailable_code: str | None
    unavailable_reason: str | None
    items: list[Rerun]  # newest first


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

    @get("/{run_id:int}/reruns")
    async def reruns(self, user: UserContext, run_id: int) -> Reruns:
        """The run's re-runs for evidence and whether its bundle is kept (an admin or an auditor)."""
        return Reruns(**await rerun.overview(user, run_id))

    @get("/{run_id:int}/reruns/{rerun_id:int}")
    async def one_rerun(self, user: UserContext, run_id: int, rerun_id: int) -> Rerun:
        return Rerun(**await rerun.get(user, run_id, rerun_id))

    @post("/{run_id:int}/reruns", status_code=202, opt=AUDITOR_OK)
    async def request_rerun(self, user: UserContext, run_id: int) -> Rerun:
        """Re-run the exact approved code over the exact kept bundle in a fresh VM, actions discarded, not
        charged; audited. 409 with its reason when the bundle is not kept. Never an API token's."""
        return Rerun(**await rerun.request(user, run_id))
