from __future__ import annotations

import asyncio
from typing import Any

from litestar import Controller, get
from litestar.di import Provide

from backend import db
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class SystemController(Controller):
    path = "/api/system"
    tags = ["system"]
    dependencies = {"user": Provide(provide_user)}
    opt = ASSISTANT_OK  # reading and uploading: open to the assistant's token

    @get("/health")
    async def health(self, user: UserContext) -> dict[str, Any]:
        """What a tenant may know: its own company's runs, and how runs are isolated (the same for every
        tenant). Other companies' activity, the image path and libvirt's errors are the operator's:
        `cleanroom health`."""
        vm = await sandbox_health()
        mine = Run.company == user.company_id
        return {
            "scope": "company",
            "virt_type": vm.get("virt_type"),
            "image_hash": (vm.get("image") or {}).get("hash"),
            "runner_ok": not (vm.get("error") or vm.get("libvirt_error")),
            "queue_length": await Run.count().where(mine & (Run.status == "queued")),
            "running_runs": await Run.count().where(mine & (Run.status == "running")),
            "max_concurrent_vms": get_settings().max_concurrent_vms,
        }


async def sandbox_health() -> dict[str, Any]:
    from backend import sandbox

    try:
        return await asyncio.to_thread(sandbox.health)
    except Exception as exc:  # libvirt down or no image: say so instead of failing the page
        return {"virt_type": None, "error": f"{type(exc).__name__}: {exc}"}


async def operator_health() -> dict[str, Any]:
    """The whole host, every company: for `cleanroom health` (operators), never the HTTP API."""
    vm = await sandbox_health()
    return {
        **vm,
        "image_hash": (vm.get("image") or {}).get("hash"),
        "queue_length": await Run.count().where(Run.status == "queued"),
        "running_runs": await Run.count().where(Run.status == "running"),
        "max_concurrent_vms": get_settings().max_concurrent_vms,
        "database": "postgresql" if db.is_postgres() else "sqlite",
    }
