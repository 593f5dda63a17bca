"""Request authentication: a bearer API token (the assistant) or the session cookie (the console)."""

from __future__ import annotations

from litestar import Request

from backend.errors import NotAuthenticated
from backend.tenancy import service
from backend.tenancy.context import UserContext


async def provide_user(request: Request) -> UserContext:
    header = request.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("use 'Authorization: Bearer <api token>'")
        return await service.user_for_api_token(token.strip())
    cookie = request.cookies.get(service.SESSION_COOKIE)
    if cookie:
        return await service.user_for_session(cookie)
    raise NotAuthenticated("sign in or send an API token")
