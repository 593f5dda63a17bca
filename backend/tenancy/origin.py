"""Browser-facing defences of the session cookie: the Origin check (CSRF) and the Host allow-list.

SameSite=Strict alone does not stop a *same-site* page (another port on this host, a sibling subdomain)
from posting with the cookie, and a rebound DNS name reaches the localhost API as if it were local.
So a state-changing request signed by the cookie must name one of our own origins, and the API answers
only to Host names it was configured for. A bearer token is never sent by a browser on its own, so
token requests (the assistant's) are not subject to the Origin rule.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from litestar.config.allowed_hosts import AllowedHostsConfig
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from backend.errors import Forbidden
from backend.settings import Settings, get_settings

SESSION_COOKIE = "cleanroom_session"  # the same name as backend.tenancy.service.SESSION_COOKIE
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Handlers that read no cookie at all, marked `opt={COOKIE_FREE_KEY: True}`: the OAuth endpoints
# (backend/mcp/oauth.py), where a client proves itself with its PKCE verifier or a refresh token. A browser-based
# MCP client on another origin may call them (the SDK answers CORS for them); a cross-site request gains nothing.
COOKIE_FREE_KEY = "reads_no_cookie"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` as a browser writes it in Origin (lower case, default port left out)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


def trusted_origins(settings: Settings) -> frozenset[str]:
    """The API's own public origin and the console's: the only pages that may post with the cookie."""
    found = (origin_of(settings.effective_public_url), origin_of(settings.effective_console_url))
    return frozenset(o for o in found if o)


def _urls(settings: Settings) -> tuple[str, ...]:
    return (settings.effective_public_url, settings.effective_console_url, settings.effective_api_base_url)


def host_names(settings: Settings) -> list[str]:
    """The names this deployment is reached by: loopback, the configured URLs' hosts, and any extra."""
    names = {*LOCAL_HOSTS, *(h.strip().lower() for h in settings.allowed_hosts if h.strip())}
    for url in _urls(settings):
        hostname = urlsplit(url).hostname
        if hostname:
            names.add(f"[{hostname}]" if ":" in hostname else hostname)
    return sorted(names)


def allowed_hosts(settings: Settings) -> list[str]:
    """Host header values the API answers to. Litestar matches the whole header, port included, so each
    name is listed bare and with the ports this deployment serves on."""
    names = host_names(settings)
    ports = {settings.api_port, *(urlsplit(url).port for url in _urls(settings) if urlsplit(url).port)}
    return sorted({*names, *(f"{name}:{port}" for name in names for port in ports)})


def allowed_hosts_config(settings: Settings | None = None) -> AllowedHostsConfig:
    return AllowedHostsConfig(allowed_hosts=allowed_hosts(settings or get_settings()), www_redirect=False)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _has_session_cookie(cookie_header: str | None) -> bool:
    if not cookie_header:
        return False
    return any(part.strip().split("=", 1)[0] == SESSION_COOKIE for part in cookie_header.split(";"))


def check_origin(method: str, headers: dict[str, str | None], trusted: frozenset[str]) -> None:
    """Refuse a state-changing request a foreign page could have made a browser send.

    - bearer token: not a browser's doing; no Origin needed.
    - session cookie: the Origin must be ours; a missing Origin is refused too (browsers always send one
      on a cross-origin POST; our own console sends its origin).
    - neither (sign-in): a foreign Origin is refused (login CSRF); tools like curl send none and pass.
    """
    if method.upper() not in UNSAFE_METHODS:
        return
    if (headers.get("authorization") or "").lower().startswith("bearer "):
        return
    origin = headers.get("origin")
    normalized = origin_of(origin) if origin else None
    if normalized in trusted:
        return
    if _has_session_cookie(headers.get("cookie")):
        reason = "no Origin header" if not origin else f"Origin {origin!r} is not this site"
    elif origin:
        reason = f"Origin {origin!r} is not this site"
    else:
        return
    raise Forbidden(
        {
            "message": f"refused a cross-site request ({reason}); "
            "use the console, or an API token with 'Authorization: Bearer'",
            "allowed_origins": sorted(trusted),
        },
        code="csrf_origin",
    )


class OriginGuard(ASGIMiddleware):
    """Runs `check_origin` on every HTTP request before it reaches a handler."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        handler = scope.get("route_handler")
        if handler is not None and handler.opt.get(COOKIE_FREE_KEY):
            await next_app(scope, receive, send)
            return
        headers = {name: _header(scope, name.encode()) for name in ("authorization", "origin", "cookie")}
        check_origin(scope.get("method", "GET"), headers, trusted_origins(get_settings()))
        await next_app(scope, receive, send)
