"""create_app(): the Litestar API, assembled in one place."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Litestar, Request, Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from backend import db, heap, observe
from backend.actions.controller import ActionItemsController
from backend.audit import throttle as audit_throttle
from backend.contract import ContractJsonPlugin, declare_refusals, deprecation_headers, versioned
from backend.credits import service as credits_service
from backend.credits.controller import CreditsController, PlatformController
from backend.drive.controller import DriveController
from backend.errors import EXCEPTION_HANDLERS, AppError, unexpected_handler
from backend.evidence.controller import EvidenceController
from backend.execution import start_loop, stop_loop
from backend.fleet.controller import WorkerController
from backend.fleet.queue import DISPATCHER
from backend.flows import progress as flows_progress
from backend.flows.controller import FlowsController
from backend.mcp.http import mcp_endpoint, mcp_lifespan
from backend.mcp.oauth import oauth_endpoints, oauth_metadata
from backend.metrics import HTTP_METRICS, metrics_endpoint
from backend.notify.controller import NotificationsController
from backend.notify.delivery import NOTIFIER
from backend.records import jobs as record_jobs
from backend.records.controller import RecordsController
from backend.records.datasets import DATASET_NAMES
from backend.records.datasets_controller import DatasetsController
from backend.records.import_controller import DatasetImportController
from backend.records.visibility import company_datasets
from backend.review.controller import ReviewController
from backend.runs import gates, queued
from backend.runs.acknowledge_controller import FindingAcknowledgementsController
from backend.runs.controller import RunsController
from backend.runs.gates import feature_guard
from backend.schedules.controller import SchedulesController
from backend.settings import get_settings
from backend.system_controller import SystemController
from backend.tenancy.audit_controller import AuditController
from backend.tenancy.auth import SELF_AUTHENTICATED, authenticate, scope_guard
from backend.tenancy.controller import AuthController, CompanyController, MeController, SetupController
from backend.tenancy.origin import OriginGuard, allowed_hosts_config
from backend.tenancy.sso_controller import SsoSettingsController, SsoSignInController
from backend.timing import ServerTiming
from backend.version import VERSION

log = logging.getLogger("cleanroom")


def fleet() -> bool:
    """Runs go to `cleanroom worker` processes (settings `workers=fleet`, PostgreSQL) instead of this one."""
    return get_settings().workers == "fleet"


# Code runs and everything about them: absent (404) while the company's assistant may not write.
CODE_RUNS = Router(
    path="/",
    guards=[feature_guard],
    route_handlers=[
        RunsController,
        FindingAcknowledgementsController,
        EvidenceController,
        FlowsController,
        ActionItemsController,
        CreditsController,
        SchedulesController,
    ],
)


async def dataset_names(request: Request) -> list[str]:
    """Every dataset's name, for handlers outside `records` that describe a person's access (/api/me, the
    permission grid): the built-ins, then the datasets the caller's company defined. Signing in (/api/auth/...)
    answers with the built-ins only: a cookie of an earlier session must not name another company's datasets."""
    if request.scope["path"].startswith("/api/auth/"):
        return list(DATASET_NAMES)
    try:
        user = await authenticate(request)
    except AppError:
        return list(DATASET_NAMES)
    return [d.name for d in await company_datasets(user.company_id)]


# every HTTP controller, by capability
CONTROLLERS = [
    AuthController,
    SetupController,  # GET /api/setup: whether any company exists (nothing else), for the sign-in page
    MeController,
    CompanyController,
    SsoSignInController,
    SsoSettingsController,
    NotificationsController,  # /api/me/notifications, /api/company/webhooks
    RecordsController,
    DatasetImportController,  # /api/datasets/…/import, /source, /sync: a person's, never a token's
    DatasetsController,
    AuditController,
    ReviewController,  # GET /api/audit (filtered), a run's timeline, the reports
    DriveController,
    CODE_RUNS,
    SystemController,  # /api/health and /api/system/health: one Health shape
    PlatformController,  # /api/platform: the assistant platform's charges (its own credential only)
    mcp_endpoint,  # MCP streamable HTTP at /mcp (assistant tokens only)
    oauth_endpoints,  # OAuth 2.1 for /mcp: /oauth/authorize, /token, /register, /revoke (the SDK's handlers)
    oauth_metadata,  # /.well-known/: the protected resource's and the authorization server's metadata
    metrics_endpoint,  # Prometheus at /metrics (the metrics token only; none set: off)
]


SERVE_WORKER_HERE = "CLEANROOM_SERVE_WORKER_HERE"  # "0": `serve` runs a local worker process of its own


def served_app() -> Litestar:
    """One of the API processes of `cleanroom serve --processes N` (uvicorn's factory, called in each). In a
    fleet each may dispatch (one does at a time: `fleet.queue.Dispatcher`); embedded, `serve`'s own local
    worker runs the runs and each process wakes it when it queues one."""
    import os

    from backend.execution.process import poke_loop_process

    loop_here = os.environ.get(SERVE_WORKER_HERE, "1") != "0"
    observe.configure_logging()  # uvicorn's supervisor started this process: its log lines as `serve`'s
    app = create_app(loop_here=loop_here, settle_heap=True)
    if not loop_here and not fleet():
        queued.listen(poke_loop_process)
    return app


class CleanroomApp(Litestar):
    """The API: its routes live under /api/ and are served under /api/v1/ too, the path the document names
    (backend/contract.py, `versioned`); an answer on a path without the version says it is deprecated."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await super().__call__(scope, receive, send)
            return
        inner, alias = versioned(scope)
        if not alias or scope["type"] != "http":
            await super().__call__(inner, receive, send)
            return
        extra = deprecation_headers(scope["path"])

        async def send_deprecated(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await super().__call__(inner, receive, send_deprecated)


def create_app(
    *,
    database_url: str | None = None,
    run_hooks: bool = True,
    pool: bool = True,
    loop_here: bool = True,
    settle_heap: bool = False,
) -> Litestar:
    """`loop_here=False`: runs go to a worker process (`cleanroom serve` supervises one), not this one.
    `settle_heap`: a served process's garbage collector set once it has started (`heap.settle`)."""
    db.configure(database_url)
    # an import or sync queued wakes whatever runs the queue, as a queued run does (records/jobs.py)
    record_jobs.listen(queued.announce)

    async def on_startup() -> None:
        flows_progress.wire()  # a run ending in this process (a gate, a fleet result, the worker) moves its flow on
        gates.wire()  # a gate turned off here cancels the runs already waiting
        if pool:
            await db.start_pool()
        await db.create_schema()
        if run_hooks:  # crash recovery, then the worker (or, in a fleet, the dispatcher to the workers)
            if fleet():
                await DISPATCHER.start()
            elif loop_here:
                await start_loop()
            # retries of mails and webhooks (backend/notify/delivery.py), and the credit pools' thresholds
            NOTIFIER.start(watchers=[credits_service.tell_pools])
        if settle_heap:
            # the injection scanner's tier 3 is not loaded here: the first scan that needs it loads it
            # (backend/injection/encoder.py `load`), so a process that never scans prose never pays for it
            heap.settle()

    async def on_shutdown() -> None:
        if run_hooks:
            await NOTIFIER.stop()
            if fleet():
                await DISPATCHER.stop()
            elif loop_here:
                await stop_loop()
        await audit_throttle.flush()  # refusals still counted get their audit entry
        if pool:
            await db.close_pool()

    handlers: dict[Any, Any] = dict(EXCEPTION_HANDLERS)
    handlers[Exception] = unexpected_handler
    # /api/worker (fleet workers with their enrollment tokens only) exists only in a fleet
    fleet_handlers = [WorkerController] if fleet() else []
    app = CleanroomApp(
        route_handlers=[*CONTROLLERS, *fleet_handlers],
        dependencies={"dataset_names": Provide(dataset_names)},
        exception_handlers=handlers,
        guards=[scope_guard],  # a token reaches only what its scope opens; the rest is a person's
        on_startup=[on_startup],
        on_shutdown=[on_shutdown],
        lifespan=[mcp_lifespan],  # the MCP session manager runs with the app
        openapi_config=OpenAPIConfig(
            title="Cleanroom API",
            version=VERSION,  # the package's (backend/version.py)
            path="/schema",
            # the same document for every caller, an assistant's token included (it must read what it follows);
            # its own routes are not operations of the API
            openapi_router=Router(
                path="/schema", route_handlers=[], opt=SELF_AUTHENTICATED, include_in_schema=False
            ),
            # the JSON document only: a UI renderer would load its JavaScript from a CDN on the API's origin
            render_plugins=[ContractJsonPlugin()],
        ),
        request_max_body_size=get_settings().max_upload_bytes + 1024 * 1024,
        allowed_hosts=allowed_hosts_config(),  # DNS rebinding to the localhost API answers 400
        # the request's id for its log lines (outermost), its latency and answer per route (/metrics), the time
        # taken when asked for; a cookie-signed change must come from our own origin
        middleware=[
            observe.RequestIdMiddleware,
            HTTP_METRICS.middleware,
            *([ServerTiming()] if get_settings().server_timing else []),
            OriginGuard(),
        ],
        debug=False,
        # the process's logging is backend/observe.py's (JSON or text, with the request id): Litestar's default
        # configuration would replace the root logger's handler with its own plain one
        logging_config=None,
    )
    declare_refusals(app)  # what each operation may refuse, as the problem documents it sends
    return app
