"""Request authentication and the one scope rule.

Who is asking, and how: a signed-in person (the session cookie the console holds) or the assistant (a
personal API token with the assistant scope). A token may call only the handlers that say so with
`opt=ASSISTANT_OK` (reading, uploading, proposing, revising, following up); every other handler is a
person's decision, refused to a token with 403 `person_required` and an audit entry naming the token (one
a minute per token, with the count of refusals it stands for: `backend/audit/throttle.py`).
New handlers are person-only unless they opt in: the safe default.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from backend.audit import throttle as audit_throttle
from backend.errors import Forbidden, NotAuthenticated
from backend.tenancy import service
from backend.tenancy.context import TOKEN, UserContext

ASSISTANT_SCOPE = service.ASSISTANT_SCOPE
TOKEN_SCOPES = "token_scopes"
ASSISTANT_OK: dict[str, Any] = {TOKEN_SCOPES: frozenset({ASSISTANT_SCOPE})}
CONTEXT_KEY = "cleanroom_user"  # where the resolved caller is kept in the ASGI scope
# Handlers that check their own credential (a worker's enrollment token, the metrics token) and never
# serve a person or the assistant: `opt=SELF_AUTHENTICATED`. No user token or session is resolved there.
SELF_AUTHENTICATED_KEY = "self_authenticated"
SELF_AUTHENTICATED: dict[str, Any] = {SELF_AUTHENTICATED_KEY: True}


async def authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> UserContext:
    """The caller's context, resolved once per request (the guard and the handler share it)."""
    scope: dict[str, Any] = connection.scope  # type: ignore[assignment]
    cached = scope.get(CONTEXT_KEY)
    if cached is not None:
        return cached
    header = connection.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("use 'Authorization: Bearer <api token>'")
        ctx = await service.user_for_api_token(token.strip())
    else:
        cookie = connection.cookies.get(service.SESSION_COOKIE)
        if not cookie:
            raise NotAuthenticated("sign in or send an API token")
        ctx = await service.user_for_session(cookie)
    scope[CONTEXT_KEY] = ctx
    return ctx


async def scope_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Applied to every route: a token reaches only handlers open to its scope."""
    if not connection.headers.get("authorization") or handler.opt.get(SELF_AUTHENTICATED_KEY):
        return
    ctx = await authenticate(connection)
    if ctx.auth != TOKEN or ctx.token_scope in handler.opt.get(TOKEN_SCOPES, frozenset()):
        return
    method, path = connection.scope.get("method", ""), connection.url.path
    await audit_throttle.record(  # one entry per token a minute, with a count: a loop cannot flood the trail
        ("auth.person_required", ctx.token_id),
        "auth.person_required",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="api_token",
        subject_id=ctx.token_id,
        data={"method": method, "path": path, "token_id": ctx.token_id, "scope": ctx.token_scope},
        route=f"{method} {path}",
    )
    raise Forbidden(
        {
            "message": "this is a person's decision: an API token (the assistant's) may read, upload, "
            "propose, revise and ask follow-ups, never approve, accept, schedule, manage tokens or change "
            "settings; sign in to the console to do it",
            "token_id": ctx.token_id,
            "scope": ctx.token_scope,
        },
        code="person_required",
    )


async def provide_user(request: Request) -> UserContext:
    return await authenticate(request)
