"""The OAuth 2.1 endpoints of the MCP server, served by the API: the MCP SDK's own handlers over Cleanroom's
provider (`backend/tenancy/oauth.py`).

- `/.well-known/oauth-protected-resource/mcp` (RFC 9728): the MCP endpoint's metadata, naming this authorization
  server; `/mcp` answers a request without a valid token 401 with a `WWW-Authenticate` pointing here.
- `/.well-known/oauth-authorization-server/oauth` (RFC 8414), and at the root for clients of the 2025-03-26
  specification: the authorization server's metadata (issuer `<public URL>/oauth`).
- `/oauth/authorize` (code + PKCE S256, redirects the person to the console's consent page), `/oauth/token`
  (the code, or a refresh token, for tokens), `/oauth/register` (RFC 7591, public clients only), `/oauth/revoke`
  (RFC 7009).

They speak the OAuth wire formats (form bodies, `{"error": ...}` answers), not the API's problem documents, so
they are left out of the OpenAPI document as `/mcp` is; each checks its own credential (a client's PKCE verifier,
a refresh token), so the API's guard resolves no user there (`SELF_AUTHENTICATED`)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from litestar import asgi
from litestar.types import Receive, Scope, Send

from backend.tenancy import oauth
from backend.tenancy.auth import SELF_AUTHENTICATED
from backend.tenancy.origin import COOKIE_FREE_KEY

if TYPE_CHECKING:
    from mcp.server.auth.provider import OAuthAuthorizationServerProvider

# each checks its own credential (no user is resolved), and none reads a cookie (so any origin may call it)
OPT = {**SELF_AUTHENTICATED, COOKIE_FREE_KEY: True}
AS_WELL_KNOWN = "/.well-known/oauth-authorization-server"
PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
REGISTER_PATH = oauth.ISSUER_PATH + "/register"


@lru_cache(maxsize=4)
def _app(issuer: str, resource: str) -> Any:
    """The SDK's routes, moved under the issuer's path (its metadata names them there)."""
    from mcp.server.auth.handlers.metadata import MetadataHandler
    from mcp.server.auth.routes import (
        build_metadata,
        cors_middleware,
        create_auth_routes,
        create_protected_resource_routes,
    )
    from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
    from pydantic import AnyHttpUrl
    from starlette.applications import Starlette
    from starlette.routing import Route

    registration = ClientRegistrationOptions(
        enabled=True, valid_scopes=[oauth.SCOPE], default_scopes=[oauth.SCOPE]
    )
    revocation = RevocationOptions(enabled=True)
    issuer_url = AnyHttpUrl(issuer)
    metadata = build_metadata(issuer_url, None, registration, revocation)
    # every client is public (tenancy/oauth.py register_client): no secret is issued, PKCE proves each code
    metadata.token_endpoint_auth_methods_supported = ["none"]
    metadata.revocation_endpoint_auth_methods_supported = ["none"]
    metadata_endpoint = cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    routes: list[Any] = [
        Route(AS_WELL_KNOWN + oauth.ISSUER_PATH, endpoint=metadata_endpoint, methods=["GET", "OPTIONS"]),
        Route(AS_WELL_KNOWN, endpoint=metadata_endpoint, methods=["GET", "OPTIONS"]),
    ]
    # the SDK's protocol also names `exchange_identity_assertion` (the SEP-990 jwt-bearer grant), which
    # AuthorizationServer does not offer: create_auth_routes leaves that grant off (identity_assertion_enabled
    # defaults to False; the token endpoint refuses it before reaching the provider), so it is never called
    provider = cast("OAuthAuthorizationServerProvider[Any, Any, Any]", oauth.AuthorizationServer())
    for route in create_auth_routes(provider, issuer_url, None, registration, revocation):
        if route.path != AS_WELL_KNOWN:
            routes.append(
                Route(oauth.ISSUER_PATH + route.path, endpoint=route.endpoint, methods=route.methods)
            )
    resource_routes = create_protected_resource_routes(
        AnyHttpUrl(resource), [issuer_url], scopes_supported=[oauth.SCOPE], resource_name="Cleanroom"
    )
    routes.extend(resource_routes)
    # and at the root, for a client that looks there first (RFC 9728 section 3.1 with no path)
    routes.extend(Route(PRM_WELL_KNOWN, endpoint=r.endpoint, methods=r.methods) for r in resource_routes)
    return Starlette(routes=routes)


def _unavailable(issuer: str) -> str | None:
    """Why OAuth cannot be offered here, or None: RFC 8414 wants an https issuer (http on this machine only)."""
    from mcp.server.auth.routes import validate_issuer_url
    from pydantic import AnyHttpUrl

    try:
        validate_issuer_url(AnyHttpUrl(issuer))
    except ValueError as exc:
        return (
            f"OAuth needs the API's public URL on https ({exc}; the public URL is {issuer[: -len(oauth.ISSUER_PATH)]}): "
            "set CLEANROOM_PUBLIC_URL, or connect with a personal API token"
        )
    return None


async def _serve(scope: Scope, receive: Receive, send: Send) -> None:
    issuer = oauth.issuer_url()
    if why := _unavailable(issuer):
        from backend.mcp.problems import refuse

        await refuse(send, 404, "oauth_unavailable", why)
        return
    inner: dict[str, Any] = dict(scope)
    inner["root_path"] = ""
    inner["path"] = scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or scope["path"]
    if inner["path"] == REGISTER_PATH and scope.get("method") == "POST":
        # open to anyone, so counted per address (the proxy's named in FORWARDED_ALLOW_IPS gives the client's)
        address = oauth.address_hash((scope.get("client") or ("", 0))[0] or "")
        if why := await oauth.registration_refused(address):
            await _too_many(send, why)
            return
        oauth.registering_from.set(address)
    await _app(issuer, oauth.resource_url())(inner, receive, send)


async def _too_many(send: Send, why: str) -> None:
    """RFC 7591's error shape (the registration endpoint speaks OAuth, not problem documents), as a 429."""
    from backend.mcp.problems import send_json

    retry = str(int(oauth.REGISTRATION_WINDOW.total_seconds()))
    content = {"error": "too_many_requests", "error_description": why}
    await send_json(
        send, 429, content, "application/json", {"retry-after": retry, "cache-control": "no-store"}
    )


@asgi(oauth.ISSUER_PATH, is_mount=True, copy_scope=True, opt=OPT, include_in_schema=False)
async def oauth_endpoints(scope: Scope, receive: Receive, send: Send) -> None:
    """/oauth/authorize, /oauth/token, /oauth/register, /oauth/revoke (the SDK's handlers)."""
    await _serve(scope, receive, send)


@asgi("/.well-known", is_mount=True, copy_scope=True, opt=OPT, include_in_schema=False)
async def oauth_metadata(scope: Scope, receive: Receive, send: Send) -> None:
    """The protected resource's and the authorization server's metadata (RFC 9728, RFC 8414)."""
    await _serve(scope, receive, send)
