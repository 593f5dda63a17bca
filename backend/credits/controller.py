from __future__ import annotations

from litestar import Controller, get
from litestar.di import Provide

from backend.credits import service as credits
from backend.credits.schemas import CreditUsage
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class CreditsController(Controller):
    path = "/api/credits"
    tags = ["credits"]
    dependencies = {"user": Provide(provide_user)}

    @get("/", opt=ASSISTANT_OK)
    async def usage(self, user: UserContext) -> CreditUsage:
        return await credits.usage(user)
