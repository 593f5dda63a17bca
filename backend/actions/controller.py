from __future__ import annotations

from litestar import Controller, get, post
from litestar.di import Provide

from backend.actions import service as actions
from backend.actions.schemas import ActionItemInfo
from backend.runs.schemas import ReasonBody
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class ActionItemsController(Controller):
    """A run's proposed changes (`/api/runs/{id}/action-items`) and each item's decision."""

    path = "/api"
    tags = ["actions"]
    dependencies = {"user": Provide(provide_user)}

    @get("/runs/{run_id:int}/action-items", opt=ASSISTANT_OK)
    async def list_items(self, user: UserContext, run_id: int) -> list[ActionItemInfo]:
        return await actions.list_items(user, run_id)

    @get("/action-items/{item_id:int}", opt=ASSISTANT_OK)
    async def get_item(self, user: UserContext, item_id: int) -> ActionItemInfo:
        return await actions.get_item(user, item_id)

    @post("/action-items/{item_id:int}/accept", status_code=200)
    async def accept(self, user: UserContext, item_id: int) -> ActionItemInfo:
        return await actions.accept(user, item_id)

    @post("/action-items/{item_id:int}/reject", status_code=200)
    async def reject(self, user: UserContext, item_id: int, data: ReasonBody | None = None) -> ActionItemInfo:
        return await actions.reject(user, item_id, (data or ReasonBody()).reason)
