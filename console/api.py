"""The console's only way to the backend: an httpx client of the HTTP API (docs/api.md).

Each browser user's session token lives in NiceGUI's `app.storage.user`; every call sends it as the
API's session cookie, with the console's own Origin (the API refuses cookie-signed changes from any other
origin). The API hands the session out only in the Set-Cookie of the sign-in response.
Tests inject a transport (e.g. `httpx.ASGITransport` around the Litestar app). Every call goes through
`backend.client` and answers the API's own schema (a `RunDetail`, a `FlowPage`, …), over one `httpx.AsyncClient`
per `ApiConfig` (one per console process), closed at shutdown (`ApiConfig.aclose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any

import httpx

from backend.client import CleanroomClient, Refusal, shared_http
from backend.tenancy.schemas import LoginResult

SESSION_COOKIE = "cleanroom_session"

_MESSAGES = {
    "not_authenticated": "You are not signed in (or your session expired). Sign in again.",
    "forbidden": "You are not allowed to do that.",
    "not_found": "Not found (it may not exist, or it is not yours).",
    "conflict": "Conflict",
    "credits_exhausted": "The company's credit pool is empty.",
    "too_many_requests": "Too many attempts.",  # the detail says how long to wait
    "code_execution_disabled": "Code execution is turned off for this company.",
    "attempts_exhausted": "No attempts left for this run.",
    "unreachable": "The Cleanroom API cannot be reached.",
}


class ApiError(Exception):
    """A refusal or failure from the API, carrying its `{"error": code, "detail": ...}` body."""

    def __init__(self, status: int, code: str, detail: Any = None) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        super().__init__(self.message)

    @property
    def message(self) -> str:
        detail = _detail_text(self.detail)
        base = _MESSAGES.get(self.code)
        if base and detail and detail.lower() not in base.lower():
            return f"{base} {detail[:1].upper()}{detail[1:]}" if base.endswith(".") else f"{base}: {detail}"
        return base or detail or f"{self.code} (HTTP {self.status})"


def _detail_text(detail: Any) -> str:
    if detail is None:
        return ""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict):
        if "message" in detail:
            text = str(detail["message"])
            if detail.get("line") and f"line {detail['line']}" not in text:
                text += f" (line {detail['line']})"
            if fields := detail.get("fields"):  # a body the API refused: which field, and why
                text += ": " + "; ".join(_field_text(f) for f in fields)
            return text
        if "refused" in detail:
            return "; ".join(f"{r.get('dataset')}: {r.get('reason')}" for r in detail["refused"])
        return "; ".join(f"{k}: {v}" for k, v in detail.items())
    if isinstance(detail, list):
        return "; ".join(_detail_text(d) for d in detail)
    return str(detail)


def _field_text(field: Any) -> str:
    if isinstance(field, dict) and field.get("key"):
        return f"{field['key']}: {field.get('message', 'invalid')}"
    return _detail_text(field.get("message") if isinstance(field, dict) else field)


def _console_origin() -> str:
    from backend.settings import get_settings
    from backend.tenancy.origin import origin_of

    return origin_of(get_settings().effective_console_url) or ""


@dataclass
class ApiConfig:
    base_url: str
    transport: httpx.AsyncBaseTransport | None = None
    timeout: float = 30.0
    origin: str = field(default_factory=_console_origin)  # sent as Origin: the API trusts the console's
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False, compare=False)

    def http(self) -> httpx.AsyncClient:
        """The one client every user's `Api` of this console shares (opened on first use; no cookie jar:
        each call carries its own user's session)."""
        if self._http is None or self._http.is_closed:
            self._http = shared_http(self.base_url, transport=self.transport, timeout=self.timeout)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def session_from_set_cookie(response: httpx.Response) -> str | None:
    """The session secret from the sign-in response's Set-Cookie (read here, not through a cookie jar,
    so a `secure` cookie still reaches a console that talks to the API over local http)."""
    for header in response.headers.get_list("set-cookie"):
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(header)
        except CookieError:
            continue
        if SESSION_COOKIE in jar and jar[SESSION_COOKIE].value:
            return jar[SESSION_COOKIE].value
    return None


class Api(CleanroomClient):
    """One user's view of the API: the typed client (`backend.client`) sending this user's session cookie and
    the console's Origin; a refusal is an `ApiError`."""

    def __init__(self, config: ApiConfig, session: str | None = None) -> None:
        super().__init__(config.http())
        self.config = config
        self.session = session

    def auth_headers(self) -> dict[str, str]:
        headers = {"Origin": self.config.origin} if self.config.origin else {}
        if self.session:
            headers["Cookie"] = f"{SESSION_COOKIE}={self.session}"
        return headers

    def clean_params(self, params: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in params.items() if v not in (None, "")}

    def refused(self, response: httpx.Response, refusal: Refusal) -> ApiError:
        if refusal.parsed:
            return ApiError(response.status_code, refusal.code, refusal.detail)
        return ApiError(response.status_code, "error", response.text[:300] or response.reason_phrase)

    def unreachable(self, exc: httpx.HTTPError) -> ApiError:
        return ApiError(0, "unreachable", f"{self.config.base_url}: {exc}")

    async def login(self, email: str, password: str, client_address: str | None = None) -> LoginResult:
        """Signs in and keeps the session; the answer names the signed-in person. `client_address`: the browser's, forwarded
        signed so the API counts failed sign-ins on it, not on the console's own address
        (backend/tenancy/forwarded.py)."""
        from backend.tenancy import forwarded

        headers = forwarded.headers(client_address, email) if client_address else {}
        result, response = await self.authenticate(email, password, headers=headers)
        self.session = session_from_set_cookie(response)
        if not self.session:
            raise ApiError(response.status_code, "error", "the API signed in but set no session cookie")
        return result
