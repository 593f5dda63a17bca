"""Request authentication and the one scope rule.

Who is asking, and how: a signed-in person (the session cookie the console holds) or the assistant (a
personal API token with the assistant scope). A token may call only the handlers that say so with
`opt=ASSISTANT_OK` (reading, uploading, proposing, revising, following up); every other handler is a
person's decision, refused to a token with 403 `person_required` and an audit entry naming the token (one
a minute per token, with the count of refusals it stands for: `backend/audit/throttle.py`).
New handlers are person-only unless they opt in: the safe default.

An auditor (a role a company admin grants) reads and decides nothing: whatever they sign in with, they reach
the reading handlers (GET) and the few that change nothing of the company's and say so with
`opt=AUDITOR_OK` (signing in and out, verifying the chain); every other handler refuses them with 403
`auditor_decides_nothing`, audited like a token's refusal. New handlers refuse an auditor unless they read.
"""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from backend.audit import throttle as audit_throttle
from backend.errors import Forbidden, NotAuthenticated
from backend.tenancy import service
from backend.tenancy.context import AUDITOR_REFUSED, TOKEN, UserContext, auditor_refused

ASSISTANT_SCOPE = service.ASSISTANT_SCOPE
TOKEN_SCOPES = "token_scopes"
ASSISTANT_OK: dict[str, Any] = {TOKEN_SCOPES: frozenset({ASSISTANT_SCOPE})}
CONTEXT_KEY = "cleanroom_user"  # where the resolved caller is kept in the ASGI scope
# Handlers that check their own credential (a worker's enrollment token, the metrics token) and never
# serve a person or the assistant, or that answer everyone alike (the API's OpenAPI document, which an
# assistant's token must be able to read to follow it): `opt=SELF_AUTHENTICATED`. No user token or session is
# resolved there.
SELF_AUTHENTICATED_KEY = "self_authenticated"
SELF_AUTHENTICATED: dict[str, Any] = {SELF_AUTHENTICATED_KEY: True}
# Handlers other than reads (GET) an auditor may call: they change nothing of the company's.
AUDITOR_OK_KEY = "auditor_ok"
AUDITOR_OK: dict[str, Any] = {AUDITOR_OK_KEY: True}
READ_METHODS = frozenset({"GET", "HEAD"})


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
    """Applied to every route: a token reaches only handlers open to its scope; an auditor only reads."""
    if handler.opt.get(SELF_AUTHENTICATED_KEY):
        return
    await _token_scope(connection, handler)
    await _auditor_reads(connection, handler)


async def _auditor_reads(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """An auditor's session or token reaches reads and AUDITOR_OK handlers only. Nobody else is resolved
    here for a read; a caller who cannot be resolved is left to the handler (login needs no one)."""
    method = connection.scope.get("method", "")
    if method in READ_METHODS or handler.opt.get(AUDITOR_OK_KEY):
        return
    if not connection.headers.get("authorization") and not connection.cookies.get(service.SESSION_COOKIE):
        return
    try:
        ctx = await authenticate(connection)
    except NotAuthenticated:
        return
    if not ctx.is_auditor:
        return
    path = connection.url.path
    await audit_throttle.record(  # as a token's refusals: one entry a minute per auditor, with a count
        (AUDITOR_REFUSED, ctx.user_id),
        "auth.auditor_refused",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="user",
        subject_id=ctx.user_id,
        data={"method": method, "path": path, **ctx.via()},
        route=f"{method} {path}",
    )
    raise auditor_refused(f"this request ({method} {path})")


async def _token_scope(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    if not connection.headers.get("authorization"):
        return
    ctx = await authenticate(connection)
    if ctx.auth != TOKEN or ctx.token_scope in handler.opt.get(TOKEN_SCOPES, frozenset()):
        return
    method, path = connection.scope.get("method", ""), connection.url.path
    kind, credential_id = ctx.credential  # a personal token, or an OAuth grant
    await audit_throttle.record(  # one entry per token a minute, with a count: a loop cannot flood the trail
        ("auth.person_required", kind, credential_id),
        "auth.person_required",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type=kind,
        subject_id=credential_id,
        data={"method": method, "path": path, **ctx.via()},
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
