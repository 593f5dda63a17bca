from __future__ import annotations

import asyncio
from typing import Any

from litestar import Controller, get
from litestar.di import Provide

from backend import db
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.tenancy.auth import provide_user
from backend.tenancy.context import UserContext


class SystemController(Controller):
    path = "/api/system"
    tags = ["system"]
    dependencies = {"user": Provide(provide_user)}

    @get("/health")
    async def health(self, user: UserContext) -> dict[str, Any]:
        from backend import sandbox

        try:
            vm = await asyncio.to_thread(sandbox.health)
        except Exception as exc:  # libvirt down or no image: say so instead of failing the page
            vm = {"virt_type": None, "error": f"{type(exc).__name__}: {exc}"}
        return {
            **vm,
            "image_hash": (vm.get("image") or {}).get("hash"),
            "queue_length": await Run.count().where(Run.status == "queued"),
            "running_runs": await Run.count().where(Run.status == "running"),
            "max_concurrent_vms": get_settings().max_concurrent_vms,
            "database": "postgresql" if db.is_postgres() else "sqlite",
        }
