"""/api/runs/{id}/findings/{index}/acknowledgement and /api/injection/acknowledgements: an admin's "expected
here" for an injection finding (backend/runs/acknowledge.py). A person's decision: never a token's."""

from __future__ import annotations

from litestar import Controller, delete, get, post
from litestar.di import Provide

from backend.runs import acknowledge
from backend.runs.schemas import AcknowledgeBody, FindingAcknowledgementInfo
from backend.tenancy.auth import provide_user
from backend.tenancy.context import UserContext


class FindingAcknowledgementsController(Controller):
    path = "/api"
    tags = ["runs"]
    dependencies = {"user": Provide(provide_user)}

    @post("/runs/{run_id:int}/findings/{index:int}/acknowledgement", status_code=201)
    async def acknowledge(
        self, user: UserContext, run_id: int, index: int, data: AcknowledgeBody
    ) -> FindingAcknowledgementInfo:
        """Admin only: mark finding `index` of the run's `findings` "expected here" for the company (its cell
        hash and column). 403 for anyone else, 404 for a run the admin cannot see, 409 when it is already."""
        return FindingAcknowledgementInfo(**await acknowledge.acknowledge(user, run_id, index, data.reason))

    @get("/injection/acknowledgements")
    async def list_acknowledgements(self, user: UserContext) -> list[FindingAcknowledgementInfo]:
        """Admin only: the company's acknowledgements."""
        return [FindingAcknowledgementInfo(**a) for a in await acknowledge.list_acknowledgements(user)]

    @delete("/injection/acknowledgements/{ack_id:int}", status_code=204)
    async def withdraw(self, user: UserContext, ack_id: int) -> None:
        """Admin only: withdraw one (another company's: 404)."""
        await acknowledge.withdraw(user, ack_id)
