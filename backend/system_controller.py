"""Health: one shape for every caller. `GET /api/health` is the public liveness answer (no sign-in, the
company fields empty); `GET /api/system/health` is the same answer for a signed-in caller, with their own
company's queue and how runs are isolated, and nothing of another company: no other company's runs, no
queue of every company, no worker host (hosts run every company's runs). The whole host (every company,
the worker hosts, the image path, libvirt's errors, the database) is the operator's: `cleanroom health`
and `cleanroom workers list`."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Controller, get
from litestar.di import Provide
from litestar.params import Parameter
from piccolo.query.functions.aggregate import Count

from backend import db
from backend.fleet import service as fleet
from backend.runs import stats
from backend.runs.schemas import QueueHistory
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.system_schemas import GuestEnvironment, Health
from backend.tenancy.auth import ASSISTANT_OK, provide_user
from backend.tenancy.context import UserContext


class SystemController(Controller):
    path = "/api"
    tags = ["system"]
    dependencies = {"user": Provide(provide_user)}
    opt = ASSISTANT_OK  # reading: open to the assistant's token

    @get("/health", tags=["health"])
    async def health(self) -> Health:
        """Liveness, without signing in."""
        return Health()

    @get("/system/health")
    async def system_health(self, user: UserContext) -> Health:
        """The public answer plus what a tenant may know: its own company's runs, and how runs are isolated."""
        return await company_health(user)

    @get("/sandbox/environment")
    async def sandbox_environment(self) -> GuestEnvironment:
        """The guest's Python and package versions, from the built image's manifest (one source of truth with the
        MCP contract and the approval screen): what code written for a run may import."""
        return GuestEnvironment(**await guest_environment())

    @get("/system/queue-history")
    async def queue_history(
        self, user: UserContext, hours: int = Parameter(default=24, ge=1, le=168)
    ) -> QueueHistory:
        """The caller's company's queue depth over the last `hours` (every 15 minutes, and now), from the runs'
        own approval and start times: the health page's chart. Only the company's own runs, as the health
        answer's queue length."""
        return await stats.queue_history(user.company_id, hours)


async def company_health(user: UserContext) -> Health:
    vm = await sandbox_health()
    mine = Run.company == user.company_id
    return Health(
        scope="company",
        virt_type=vm.get("virt_type"),
        image_hash=(vm.get("image") or {}).get("hash"),
        runner_ok=not (vm.get("error") or vm.get("libvirt_error")),
        queue_length=await Run.count().where(mine & (Run.status == "queued")),
        running_runs=await Run.count().where(mine & (Run.status == "running")),
        max_concurrent_vms=get_settings().max_concurrent_vms,
    )


async def sandbox_health() -> dict[str, Any]:
    from backend import sandbox

    try:
        return await asyncio.to_thread(sandbox.health)
    except Exception as exc:  # libvirt down or no image: say so instead of failing the page
        return {"virt_type": None, "error": f"{type(exc).__name__}: {exc}"}


async def guest_environment() -> dict[str, Any]:
    from backend.sandbox.image import manifest

    return await asyncio.to_thread(manifest)


async def operator_health() -> dict[str, Any]:
    """The whole host, every company: for `cleanroom health` (operators), never the HTTP API."""
    from backend.convert.isolated import converter_fallback

    vm = await sandbox_health()
    return {
        **vm,
        "image_hash": (vm.get("image") or {}).get("hash"),
        "queue_length": await Run.count().where(Run.status == "queued"),
        "running_runs": await Run.count().where(Run.status == "running"),
        "max_concurrent_vms": get_settings().max_concurrent_vms,
        "database": "postgresql" if db.is_postgres() else "sqlite",
        "converter_fallback": await asyncio.to_thread(converter_fallback),  # [] when fully confined
        "workers": await fleet.hosts(),  # fleet workers; runs per company waiting: queue_by_company
        "queue_by_company": {
            r["company"]: r["count"]
            for r in await Run.select(Run.company, Count(Run.id, alias="count"))
            .where(Run.status == "queued")
            .group_by(Run.company)
        },
    }
