from __future__ import annotations

from litestar import Controller, delete, get, post
from litestar.di import Provide

from backend.schedules import service as schedules
from backend.schedules.schemas import ScheduleBody, ScheduleInfo
from backend.schedules.tables import ScheduleStatus
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class SchedulesController(Controller):
    path = "/api/schedules"
    tags = ["schedules"]
    dependencies = {"user": Provide(provide_user)}

    @post("/", status_code=201)
    async def create(self, user: UserContext, data: ScheduleBody) -> ScheduleInfo:
        return await schedules.create(user, data.run_id, data.cron, data.timezone, flow_id=data.flow_id)

    @get("/", opt=ASSISTANT_OK)
    async def list_schedules(self, user: UserContext) -> list[ScheduleInfo]:
        return await schedules.list_schedules(user)

    @post("/{schedule_id:int}/pause", status_code=200)
    async def pause(self, user: UserContext, schedule_id: int) -> ScheduleInfo:
        return await schedules.set_status(user, schedule_id, ScheduleStatus.paused)

    @post("/{schedule_id:int}/resume", status_code=200)
    async def resume(self, user: UserContext, schedule_id: int) -> ScheduleInfo:
        return await schedules.set_status(user, schedule_id, ScheduleStatus.active)

    @delete("/{schedule_id:int}", status_code=204)
    async def delete(self, user: UserContext, schedule_id: int) -> None:
        await schedules.delete(user, schedule_id)
