"""What `/mcp` and its OAuth endpoints answer when they refuse: a problem document sent straight to ASGI, and a
401's challenge naming the protected-resource metadata (RFC 9728 section 5.1) where an OAuth client starts.
Shared by `http.py` (the endpoint) and `oauth.py` (the authorization server's mount), which import nothing of
each other."""

from __future__ import annotations

import json

from litestar.types import Send

from backend.errors import PROBLEM_JSON, problem
from backend.tenancy import oauth


def resource_metadata_url() -> str:
    """Where `/mcp`'s 401 points a client (RFC 9728 section 5.1)."""
    from mcp.server.auth.routes import build_resource_metadata_url
    from pydantic import AnyHttpUrl

    return str(build_resource_metadata_url(AnyHttpUrl(oauth.resource_url())))


def www_authenticate() -> str:
    """A 401's challenge: where an OAuth client finds how to get a token (RFC 9728 section 5.1)."""
    return f'Bearer realm="cleanroom", error="invalid_token", resource_metadata="{resource_metadata_url()}"'


async def refuse(send: Send, status: int, code: str, detail: str) -> None:
    """A problem document sent straight to ASGI (a 401's with the challenge that tells a client where to start)."""
    content, extra = problem(code, detail, status)
    if status == 401:
        extra = {**extra, "www-authenticate": www_authenticate()}
    await send_json(send, status, content, PROBLEM_JSON, extra)


async def send_json(
    send: Send, status: int, content: object, content_type: str, extra: dict[str, str] | None = None
) -> None:
    """A JSON answer sent straight to ASGI (a problem document, or an OAuth endpoint's own error shape)."""
    body = json.dumps(content).encode()
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
