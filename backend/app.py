"""create_app(): the Litestar API, assembled in one place."""

from __future__ import annotations

import importlib
import logging
from typing import Any

from litestar import Litestar, get
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin

from backend import db
from backend.errors import EXCEPTION_HANDLERS, unexpected_handler
from backend.settings import get_settings
from backend.tenancy.auth import ASSISTANT_OK, scope_guard
from backend.tenancy.origin import OriginGuard, allowed_hosts_config

log = logging.getLogger("cleanroom")

# "module:Controller" for every HTTP controller, by capability.
CONTROLLERS = [
    "backend.tenancy.controller:AuthController",
    "backend.tenancy.controller:MeController",
    "backend.tenancy.controller:CompanyController",
    "backend.records.controller:RecordsController",
    "backend.audit.controller:AuditController",
    "backend.drive.controller:DriveController",
    "backend.runs.controller:RunsController",
    "backend.runs.controller:ActionItemsController",
    "backend.runs.controller:CreditsController",
    "backend.runs.controller:SchedulesController",
    "backend.system_controller:SystemController",
    "backend.mcp.http:mcp_endpoint",  # MCP streamable HTTP at /mcp (assistant tokens only)
]

# Callables run at start-up after the database is ready (e.g. crash recovery, the worker).
STARTUP_HOOKS: list[str] = ["backend.runs.worker:start_worker"]
SHUTDOWN_HOOKS: list[str] = ["backend.runs.worker:stop_worker"]


def _resolve(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@get("/api/health", tags=["health"], opt=ASSISTANT_OK)
async def health() -> dict[str, Any]:
    return {"status": "ok", "database": "postgresql" if db.is_postgres() else "sqlite"}


def create_app(*, database_url: str | None = None, run_hooks: bool = True, pool: bool = True) -> Litestar:
    db.configure(database_url)

    async def on_startup() -> None:
        if pool:
            await db.start_pool()
        await db.create_schema()
        if run_hooks:
            for ref in STARTUP_HOOKS:
                result = _resolve(ref)()
                if hasattr(result, "__await__"):
                    await result

    async def on_shutdown() -> None:
        if run_hooks:
            for ref in SHUTDOWN_HOOKS:
                result = _resolve(ref)()
                if hasattr(result, "__await__"):
                    await result
        if pool:
            await db.close_pool()

    handlers: dict[Any, Any] = dict(EXCEPTION_HANDLERS)
    handlers[Exception] = unexpected_handler
    return Litestar(
        route_handlers=[health, *[_resolve(ref) for ref in CONTROLLERS]],
        exception_handlers=handlers,
        lifespan=[_resolve("backend.mcp.http:mcp_lifespan")],  # the MCP session manager runs with the app
        guards=[scope_guard],  # a token reaches only what its scope opens; the rest is a person's
        on_startup=[on_startup],
        on_shutdown=[on_shutdown],
        openapi_config=OpenAPIConfig(
            title="Cleanroom API",
            version="0.1.0",
            path="/schema",
            render_plugins=[SwaggerRenderPlugin()],
        ),
        request_max_body_size=get_settings().max_upload_bytes + 1024 * 1024,
        allowed_hosts=allowed_hosts_config(),  # DNS rebinding to the localhost API answers 400
        middleware=[OriginGuard()],  # a cookie-signed change must come from our own origin
        debug=False,
    )
