"""GET /api/runs/{id}/evidence (JSON) and /evidence/html (a page that prints): for whoever may see the run.
POST /api/runs/{id}/reruns asks for a re-run for evidence; GET /api/runs/{id}/reruns[/{rerun_id}] shows each
re-run's comparison with the original: a company admin's or an auditor's, in a signed-in session only."""

from __future__ import annotations

from litestar import Controller, MediaType, Response, get, post
from litestar.di import Provide

from backend.evidence import html, rerun, service
from backend.evidence.schemas import EvidencePack, Rerun, Reruns
from backend.tenancy.auth import AUDITOR_OK, provide_user
from backend.tenancy.context import UserContext


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
