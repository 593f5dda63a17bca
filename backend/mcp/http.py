"""Streamable HTTP at `/mcp` on the API server, for an assistant: with a personal API token as a bearer header, or
with an access token issued by the API's own OAuth 2.1 authorization server (`backend/mcp/oauth.py`).

The mount is an ordinary Litestar route, so the API's own guard authenticates it first: an invalid, expired or
revoked token gets the API's 401 (with `WWW-Authenticate` naming the protected-resource metadata, RFC 9728, where an
OAuth client discovers how to get a token), and the handler opts in to the assistant scope like every other
handler a token may call. A request without a bearer token gets 401 here (a session cookie is not enough: `/mcp`
is for assistants). The request then goes through the SDK's own authentication (`AuthSettings` with a
`TokenVerifier`: `CleanroomTokenVerifier` hands it the context the guard already resolved), which binds the MCP
session to the credential that opened it (the SDK answers 404 to a request with another one). The tools then call
the same Litestar app in-process (an httpx ASGI transport) with the caller's token, so whatever the token cannot
do over HTTP it cannot do over MCP either.

The SDK's session manager runs inside the app's lifespan (`mcp_lifespan`, listed in `create_app`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import httpx
from litestar import Litestar, asgi
from litestar.connection import ASGIConnection
from litestar.types import Receive, Scope, Send

from backend.errors import NotAuthenticated, app_error_handler
from backend.mcp.problems import refuse, www_authenticate
from backend.settings import get_settings
from backend.tenancy import auth, oauth, service
from backend.tenancy.auth import ASSISTANT_OK, authenticate
from backend.tenancy.context import UserContext
from backend.tenancy.origin import origin_of, trusted_origins

if TYPE_CHECKING:
    from backend.mcp.api import CleanroomApi

log = logging.getLogger("cleanroom.mcp")

STATE_KEY = (
    "cleanroom_mcp"  # the SDK's Starlette app for /mcp (its auth middleware, then the session manager)
)
CLIENT_KEY = "cleanroom_mcp_client"
IN_PROCESS_BASE = "http://127.0.0.1"  # a Host the API always answers to
# the bearer token of this /mcp request and the context the API's guard resolved from it (read by the verifier)
RESOLVED: ContextVar[tuple[str, UserContext] | None] = ContextVar("cleanroom_mcp_resolved", default=None)


class CleanroomTokenVerifier:
    """The SDK's `TokenVerifier`: a personal API token or an OAuth access token, as the API resolves it (the
    person it acts for, the assistant scope). The guard has already resolved this request's token: its context is
    handed over (`RESOLVED`), with no second look-up; any other token is looked up as the API would."""

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        resolved = RESOLVED.get()
        if resolved is not None and resolved[0] == token:
            ctx = resolved[1]
        else:
            try:
                ctx = await service.user_for_api_token(token)
            except NotAuthenticated:
                return None
        kind, credential_id = ctx.credential
        return AccessToken(
            token=token,
            client_id=f"cleanroom-{kind}-{credential_id}",  # one MCP session, one credential
            scopes=[ctx.token_scope or ""],
            subject=str(ctx.user_id),
        )


def auth_settings() -> Any:
    """The SDK's resource-server settings for /mcp: the assistant scope required, this API's authorization server.
    The verifier checks each token's audience itself (an access token is only ever issued for this endpoint)."""
    from mcp.server.auth.settings import AuthSettings

    return AuthSettings(
        issuer_url=oauth.issuer_url(),
        resource_server_url=oauth.resource_url(),
        required_scopes=[oauth.SCOPE],
        validate_token_resource=False,
    )


def _not_authenticated(request: Any, exc: NotAuthenticated) -> Any:
    """The API's 401, with the challenge that tells an OAuth client where to start."""
    response = app_error_handler(request, exc)
    response.headers["WWW-Authenticate"] = www_authenticate()
    return response


@asgi(
    "/mcp",
    copy_scope=True,
    opt=ASSISTANT_OK,
    include_in_schema=False,
    exception_handlers={NotAuthenticated: _not_authenticated},
)
async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """The MCP streamable HTTP endpoint (POST/GET/DELETE /mcp), for an assistant's token only.

    A request that names an Origin must name one of ours, bearer token or not (the transport's rule against
    DNS rebinding: a page elsewhere must not reach a local server through a browser); one without an Origin
    (a non-browser client: the SDK's, curl) passes to the token check."""
    origin = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"), None)
    if origin is not None and origin_of(origin) not in trusted_origins(get_settings()):
        await refuse(send, 403, "forbidden_origin", f"Origin {origin!r} is not this site; /mcp refuses it")
        return
    header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        await refuse(
            send,
            401,
            "not_authenticated",
            "send 'Authorization: Bearer <token>': an OAuth access token (connect the assistant with this URL) or "
            "a personal API token",
        )
        return
    mcp_app = scope["litestar_app"].state.get(STATE_KEY)  # type: ignore[typeddict-item]
    if mcp_app is None:
        await refuse(send, 503, "mcp_unavailable", "the MCP server is not running on this API server")
        return
    # the guard already resolved the token: the SDK's verifier reads its cached context, no second lookup
    ctx = await authenticate(ASGIConnection(scope=scope, receive=receive))
    scope["path"] = "/mcp"  # as the SDK's app routes it (the same under any mount)
    scope["root_path"] = ""
    reset = RESOLVED.set((token.strip(), ctx))
    try:
        await mcp_app(scope, receive, send)
    finally:
        RESOLVED.reset(reset)


def _connect(ctx: Any) -> CleanroomApi:
    """The API as the caller: their bearer token, this app's in-process client, and the context the API's own
    `authenticate` resolved from the token for this `/mcp` request (so the calls made for this request do not
    look the token up again)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from backend.mcp.api import CleanroomApi

    request = getattr(ctx.request_context, "request", None)
    header = (ctx.headers or {}).get("authorization", "")
    scheme, _, token = header.partition(" ")
    if request is None or scheme.lower() != "bearer" or not token.strip():
        raise ToolError("this request carries no API token")
    client = request.scope["litestar_app"].state[CLIENT_KEY]
    principal = request.scope.get(auth.CONTEXT_KEY)
    return CleanroomApi(client, token.strip(), base_url="this API server", principal=principal)


@lru_cache(maxsize=4)
def _server(console_url: str, contract: str, issuer: str, resource: str) -> Any:
    """The tools, built once per process (the same for every app: each request finds its own app's client)."""
    from backend.mcp.tools import build_server

    return build_server(
        _connect, console_url=console_url, auth=auth_settings(), token_verifier=CleanroomTokenVerifier()
    )


def _in_process(app: Litestar) -> Any:
    """The Litestar app as the in-process client reaches it: a request made for an `/mcp` request carries the
    caller's already-resolved context in its scope (where `authenticate` caches it), so the API's guard and
    handlers decide as usual without a second token lookup. Reached only through this client, never the
    network; without a context (a wait's polls) the API authenticates the token as for any request."""
    from backend.mcp.api import PRINCIPAL

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        principal = PRINCIPAL.get()
        if principal is not None:
            scope[auth.CONTEXT_KEY] = principal  # type: ignore[literal-required]
        await app(scope, receive, send)

    return asgi


def _in_process_call(record: logging.LogRecord) -> bool:
    """False for httpx's line about an in-process call: its URL is the base with no port, then the path."""
    return f" {IN_PROCESS_BASE}/" not in record.getMessage()


def _quiet_in_process_calls() -> None:
    """httpx logs every request; a tool's in-process call to the API would be logged twice (by httpx and by
    the API). Only those are dropped: the level of httpx's logger, which other clients share, is left alone."""
    httpx_log = logging.getLogger("httpx")
    if _in_process_call not in httpx_log.filters:
        httpx_log.addFilter(_in_process_call)


@asynccontextmanager
async def mcp_lifespan(app: Litestar) -> AsyncIterator[None]:
    """Runs the SDK's session manager for as long as the API serves. Without the `mcp` package the API still
    serves, and `/mcp` answers 503."""
    try:
        from mcp.server.transport_security import TransportSecuritySettings

        from backend.mcp.contract import instructions
    except ImportError as exc:  # pragma: no cover - the package is a dependency
        log.warning("MCP server disabled: %s", exc)
        yield
        return
    _quiet_in_process_calls()
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=_in_process(app)),
        base_url=IN_PROCESS_BASE,
        timeout=httpx.Timeout(120.0),
    )
    server = _server(
        get_settings().effective_console_url, instructions(), oauth.issuer_url(), oauth.resource_url()
    )
    # An app of this app's own, with its own session manager (taken at once: the shared server only remembers the
    # latest): the SDK's bearer authentication (the verifier above) and scope check, then the transport.
    # Host names are the API's own allow-list (Litestar's allowed_hosts, DNS rebinding); a bearer token,
    # which a browser never attaches by itself, is the CSRF defence.
    mcp_app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    async with client, manager.run():
        app.state[CLIENT_KEY] = client
        app.state[STATE_KEY] = mcp_app
        try:
            yield
        finally:
            app.state.pop(STATE_KEY, None)
            app.state.pop(CLIENT_KEY, None)
