"""Credits: the company pool, charges per run from measured resources, usage for charts; and the assistant
platform's charges (chat turns, ...) to the same pool, with its own credential."""

from __future__ import annotations

from datetime import datetime

from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from pydantic import BaseModel, Field

from backend.credits import platform
from backend.credits import service as credits
from backend.credits.schemas import CreditUsage
from backend.tenancy.auth import ASSISTANT_OK, SELF_AUTHENTICATED, provide_user
from backend.tenancy.context import UserContext


class CreditsController(Controller):
    path = "/api/credits"
    tags = ["credits"]
    dependencies = {"user": Provide(provide_user)}

    @get("/", opt=ASSISTANT_OK)
    async def usage(self, user: UserContext) -> CreditUsage:
        return await credits.usage(user)


class ChargeBody(BaseModel):
    company: int | str = Field(description="the company's id, or its exact name")
    user: int | str = Field(description="the person's id, or their e-mail; a person of that company")
    kind: str = Field(
        default=credits.CHAT_TURN, max_length=32, description="chat_turn, or another named kind"
    )
    credits: float = Field(gt=0, le=platform.MAX_CREDITS)
    idempotency_key: str = Field(min_length=1, max_length=200)


class PlatformChargeResult(BaseModel):
    id: int
    company_id: int
    company: str
    user_id: int
    email: str
    kind: str
    credits: float
    idempotency_key: str
    at: datetime
    remaining: float  # what was left of the pool right after this charge (below zero when it went over)
    used_up: bool  # the pool no longer covers a run: runs are refused until it fills again


class PlatformController(Controller):
    """Only the assistant platform's credential (`Bearer cpt_…`) reaches these routes; people and the assistant
    get 401 here, and the platform's credential gets 401 everywhere else."""

    path = "/api/platform"
    tags = ["platform"]
    opt = SELF_AUTHENTICATED

    @post("/charges", status_code=200)
    async def charge(self, request: Request, data: ChargeBody) -> Response[PlatformChargeResult]:
        """Charge what already happened (a chat turn) to a company's pool, once per idempotency key: the same
        key again gets the same answer (header `Idempotent-Replayed: true`) and is not charged again."""
        token = await platform.token_for(request.headers.get("authorization", ""))
        answer, replayed = await platform.charge(
            token,
            company=data.company,
            user=data.user,
            kind=data.kind,
            amount=data.credits,
            key=data.idempotency_key,
        )
        headers = {"Idempotent-Replayed": "true"} if replayed else {}
        return Response(PlatformChargeResult(**answer), headers=headers)
