"""The one way the MCP tools reach Cleanroom: its HTTP API, with the caller's own token.

Over stdio the client talks to the API over the network; mounted at `/mcp` it calls the same Litestar app
in-process (an httpx ASGI transport). Either way the API decides every permission, scope and visibility rule,
and a refusal comes back as an `ApiError` whose message a model can act on (never a stack trace).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import httpx

from backend.client import CleanroomClient, Refusal

# For the in-process transport only: the caller's context the API itself resolved from this token for the
# enclosing `/mcp` request, handed to the API's requests made on its behalf (see `backend/mcp/http.py`).
PRINCIPAL: ContextVar[Any] = ContextVar("cleanroom_mcp_principal", default=None)


class ApiError(Exception):
    """A refusal from the API (or no answer at all), worded for the assistant."""

    def __init__(self, status: int, code: str, detail: Any) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        super().__init__(describe(status, code, detail))


def _detail_message(detail: Any) -> str:
    if isinstance(detail, dict):
        return str(detail.get("message") or detail)
    return str(detail) if detail is not None else ""


def _flow_step(detail: Any, message: str) -> tuple[str, str]:
    """A flow's refusal about one step carries `step` and a message the API began with "step k (title): ":
    (" in step k (title)", the rest); ("", message) for any other refusal."""
    k = detail.get("step") if isinstance(detail, dict) else None
    if k is None or not message.startswith(f"step {k} ("):
        return "", message
    label, _, rest = message.partition("): ")
    return f" in {label})", rest


def describe(status: int, code: str, detail: Any) -> str:
    """What the assistant reads when the API says no: the API's own words, with the specifics pulled up."""
    message = _detail_message(detail)
    if code == "syntax_error" and isinstance(detail, dict):
        step, message = _flow_step(detail, message)
        where = f"line {detail.get('line')}" + (
            f", column {detail['offset']}" if detail.get("offset") else ""
        )
        return (
            f"The code{step} does not parse ({where}): {message}. Nothing was staged; fix the code and "
            "propose again."
        )
    if code == "dataset_forbidden" and isinstance(detail, dict):
        step, message = _flow_step(detail, message)
        refused = detail.get("refused") or []
        names = ", ".join(r.get("dataset", "?") for r in refused) or message
        why = "; ".join(f"{r.get('dataset')}: {r.get('reason')}" for r in refused)
        return (
            f"Not readable by this user{step}: {names}. Nothing was staged. ({why}) "
            "Call list_datasets for the datasets this user may read."
        )
    if code == "invalid" and isinstance(detail, dict) and detail.get("fields"):
        fields = "; ".join(
            f"{f.get('key') or f.get('loc') or '?'}: {f.get('message') or f.get('msg') or ''}".strip()
            for f in detail["fields"]
            if isinstance(f, dict)
        )
        return f"Invalid input: {message} ({fields})"
    if status == 401:
        return (
            "Cleanroom refused the API token (revoked, expired or never issued). Ask the person to create a "
            "new token in the console."
        )
    if status == 404:
        return f"{message or 'not found'} (unknown, or not visible to this user)"
    if code == "unreachable":
        return f"{message}; is the Cleanroom API running there?"
    if status >= 500:
        return f"Cleanroom failed to answer ({status}); try again in a moment."
    prefix = {
        402: "Credits exhausted",
        403: "Not allowed",
        409: "Conflict",
        413: "Too large",
        422: "Invalid input",
        429: "Too many requests",
    }.get(status, f"Refused ({status})")
    return f"{prefix} [{code}]: {message}" if message else f"{prefix} [{code}]"


class CleanroomApi(CleanroomClient):
    """The typed client (`backend.client`) bound to one bearer token: every method answers the API's own
    schema; a refusal is an `ApiError` worded for the assistant."""

    def __init__(
        self, client: httpx.AsyncClient, token: str, *, base_url: str = "", principal: Any = None
    ) -> None:
        super().__init__(client)
        self._token = token
        self._headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
        self._principal = principal
        self.base_url = base_url or str(client.base_url)

    def fresh(self) -> CleanroomApi:
        """The same client authenticating every request anew (for a wait that outlives its MCP request)."""
        return CleanroomApi(self.http, self._token, base_url=self.base_url)

    def auth_headers(self) -> dict[str, str]:
        return dict(self._headers)

    def refused(self, response: httpx.Response, refusal: Refusal) -> ApiError:
        return ApiError(response.status_code, refusal.code, refusal.detail)

    def unreachable(self, exc: httpx.HTTPError) -> ApiError:
        return ApiError(
            503, "unreachable", f"cannot reach Cleanroom at {self.base_url} ({type(exc).__name__})"
        )

    async def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        reset = PRINCIPAL.set(self._principal)
        try:
            return await super().send(method, path, **kwargs)
        finally:
            PRINCIPAL.reset(reset)
