"""The console's only way to the backend: an httpx client of the HTTP API (docs/api.md).

Each browser user's session token lives in NiceGUI's `app.storage.user`; every call sends it as the
API's session cookie, with the console's own Origin (the API refuses cookie-signed changes from any other
origin). The API hands the session out only in the Set-Cookie of the sign-in response.
Tests inject a transport (e.g. `httpx.ASGITransport` around the Litestar app).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any

import httpx

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


class Api:
    """One user's view of the API: every method is one documented endpoint."""

    def __init__(self, config: ApiConfig, session: str | None = None) -> None:
        self.config = config
        self.session = session

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.raw(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    async def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}) or {})
        if self.config.origin:
            headers.setdefault("Origin", self.config.origin)
        if self.session:
            headers["Cookie"] = f"{SESSION_COOKIE}={self.session}"
        params = kwargs.pop("params", None)
        if params:
            params = {k: v for k, v in params.items() if v not in (None, "")}
        try:
            async with httpx.AsyncClient(
                base_url=self.config.base_url, transport=self.config.transport, timeout=self.config.timeout
            ) as client:
                response = await client.request(method, path, headers=headers, params=params, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, "unreachable", f"{self.config.base_url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                body = response.json()
                code, detail = body.get("error", "error"), body.get("detail")
            except (ValueError, AttributeError):
                code, detail = "error", response.text[:300] or response.reason_phrase
            raise ApiError(response.status_code, code, detail)
        return response

    # identity
    async def login(self, email: str, password: str, client_address: str | None = None) -> dict[str, Any]:
        """`client_address`: the browser's, forwarded signed so the API counts failed sign-ins on it, not
        on the console's own address (backend/tenancy/forwarded.py)."""
        from backend.tenancy import forwarded

        headers = forwarded.headers(client_address) if client_address else {}
        body = {"email": email, "password": password}
        response = await self.raw("POST", "/api/auth/login", json=body, headers=headers)
        self.session = session_from_set_cookie(response)
        if not self.session:
            raise ApiError(response.status_code, "error", "the API signed in but set no session cookie")
        return response.json()

    async def logout(self) -> None:
        await self.request("POST", "/api/auth/logout")

    async def me(self) -> dict[str, Any]:
        return await self.request("GET", "/api/me/")

    async def company_settings(self) -> dict[str, Any]:
        return await self.request("GET", "/api/company/settings")

    async def update_company_settings(self, **changes: Any) -> dict[str, Any]:
        return await self.request("PATCH", "/api/company/settings", json=changes)

    # personal API tokens (a person's session only; a token gets 403 person_required)
    async def tokens(self) -> list[dict[str, Any]]:
        """[{id, name, prefix, created_at, last_used_at, revoked, scope}]: never the secret."""
        return await self.request("GET", "/api/me/tokens")

    async def create_token(self, name: str) -> dict[str, Any]:
        """{id, name, prefix, scope, token}: `token` is the secret, in this answer only (stored hashed)."""
        return await self.request("POST", "/api/me/tokens", json={"name": name})

    async def revoke_token(self, token_id: int) -> None:
        await self.request("DELETE", f"/api/me/tokens/{token_id}")

    # runs
    async def runs(self, **filters: Any) -> dict[str, Any]:
        """One page: {"items": [RunSummary], "total": n}."""
        return await self.request("GET", "/api/runs", params=filters)

    async def run(self, run_id: int) -> dict[str, Any]:
        return await self.request("GET", f"/api/runs/{run_id}")

    async def approve(
        self, run_id: int, code_sha256: str | None, bundle_sha256: str | None
    ) -> dict[str, Any]:
        """Sends the hashes the approver saw: the API refuses if the code or the data changed since."""
        body = {"code_sha256": code_sha256, "bundle_sha256": bundle_sha256}
        return await self.request("POST", f"/api/runs/{run_id}/approve", json=body)

    async def reject(self, run_id: int, reason: str) -> dict[str, Any]:
        return await self.request("POST", f"/api/runs/{run_id}/reject", json={"reason": reason or None})

    async def reruns(self, run_id: int) -> dict[str, Any]:
        """A run's re-runs for evidence and whether its bundle is kept (a company admin or an auditor)."""
        return await self.request("GET", f"/api/runs/{run_id}/reruns")

    async def request_rerun(self, run_id: int) -> dict[str, Any]:
        """Re-run the exact approved code over the exact kept bundle (actions discarded, not charged)."""
        return await self.request("POST", f"/api/runs/{run_id}/reruns")

    async def run_audit(self, run_id: int) -> list[dict[str, Any]]:
        return await self.request("GET", f"/api/runs/{run_id}/audit")

    async def action_items(self, run_id: int) -> list[dict[str, Any]]:
        return await self.request("GET", f"/api/runs/{run_id}/action-items")

    async def accept_item(self, item_id: int) -> dict[str, Any]:
        return await self.request("POST", f"/api/action-items/{item_id}/accept")

    async def reject_item(self, item_id: int, reason: str = "") -> dict[str, Any]:
        return await self.request(
            "POST", f"/api/action-items/{item_id}/reject", json={"reason": reason or None}
        )

    # flows: steps proposed together, each a run, approved or rejected at once
    async def flows(self, **filters: Any) -> dict[str, Any]:
        """One page: {"items": [FlowSummary], "total": n}."""
        return await self.request("GET", "/api/flows", params=filters)

    async def flow(self, flow_id: int) -> dict[str, Any]:
        return await self.request("GET", f"/api/flows/{flow_id}")

    async def approve_flow(self, flow_id: int, steps: list[dict[str, str | None]]) -> dict[str, Any]:
        """`steps`: every step's {code_sha256, bundle_sha256} as the approver saw them, in step order; the API
        refuses (409 hash_mismatch, naming the step) if any step's code or data changed since."""
        return await self.request("POST", f"/api/flows/{flow_id}/approve", json={"steps": steps})

    async def reject_flow(self, flow_id: int, reason: str) -> dict[str, Any]:
        return await self.request("POST", f"/api/flows/{flow_id}/reject", json={"reason": reason or None})

    async def flow_audit(self, flow_id: int) -> list[dict[str, Any]]:
        return await self.request("GET", f"/api/flows/{flow_id}/audit")

    # drive
    async def file_content(self, file_id: int) -> tuple[bytes, str]:
        response = await self.raw("GET", f"/api/drive/files/{file_id}/content")
        return response.content, response.headers.get("content-type", "application/octet-stream")

    # credits, schedules, health, audit
    async def credits(self) -> dict[str, Any]:
        return await self.request("GET", "/api/credits")

    async def schedules(self) -> list[dict[str, Any]]:
        return await self.request("GET", "/api/schedules")

    async def schedule_action(self, schedule_id: int, action: str) -> Any:
        if action == "delete":
            return await self.request("DELETE", f"/api/schedules/{schedule_id}")
        return await self.request("POST", f"/api/schedules/{schedule_id}/{action}")

    async def health(self) -> dict[str, Any]:
        return await self.request("GET", "/api/system/health")

    async def audit(self, **filters: Any) -> list[dict[str, Any]]:
        """The company's entries; a filter left as None is not sent (an empty `run=` would not be a number)."""
        return await self.request(
            "GET", "/api/audit", params={k: v for k, v in filters.items() if v is not None}
        )

    async def audit_timeline(self, run_id: int) -> dict[str, Any]:
        return await self.request("GET", f"/api/audit/runs/{run_id}/timeline")

    async def audit_report(self, name: str, **period: Any) -> list[dict[str, Any]]:
        """One of the review's reports (`approved-despite-warning`, ...), over `from`/`to` when given."""
        return await self.request(
            "GET", f"/api/audit/reports/{name}", params={k: v for k, v in period.items() if v}
        )

    async def people(self) -> list[dict[str, Any]]:
        return await self.request("GET", "/api/company/people")

    async def verify_audit(self) -> dict[str, Any]:
        return await self.request("POST", "/api/audit/verify")
