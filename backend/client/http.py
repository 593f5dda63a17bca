"""`ApiClient`: one request to the API, its refusal raised as the caller's exception, its body decoded into
the backend's schema. The `httpx.AsyncClient` underneath is shared by every `ApiClient` of a process that
talks to the same API (`shared_http`), not opened per request; whoever opens it closes it at shutdown."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from http.cookiejar import DefaultCookiePolicy
from typing import Any, TypeVar, cast

import httpx
from pydantic import BaseModel, ConfigDict, TypeAdapter

from backend.observe import REQUEST_ID_HEADER, outgoing_request_id

T = TypeVar("T")


API, API_V1 = "/api/", "/api/v1/"


def current(path: str) -> str:
    """The path the client sends: the API's operations under the version the document names (`/api/v1/`); the
    callers here write them without it (`/api/runs`), which the API keeps as deprecated aliases for a release."""
    return API_V1 + path[len(API) :] if path.startswith(API) and not path.startswith(API_V1) else path


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def decode(shape: type[T] | Any, response: httpx.Response) -> T:
    """The response body as `shape`: a pydantic model (`RunDetail`) or a typed container (`list[Person]`)."""
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        return cast(T, shape.model_validate_json(response.content))
    # a typed container (`list[Person]`) is not a `type[T]` to a type checker: what it decodes to is said here
    return cast(T, _adapter(shape).validate_json(response.content))


class _ErrorBody(BaseModel):
    """The API's one error body (backend/errors.py): an RFC 9457 problem document whose `error` member is the
    refusal's code; members beyond the RFC's and `error` say more than `detail`'s sentence."""

    model_config = ConfigDict(extra="allow")

    error: Any = None
    detail: Any = None


_PROBLEM_MEMBERS = frozenset({"type", "title", "status", "instance"})


@dataclass(frozen=True)
class Refusal:
    """What an error answer said: its code and detail, and whether the body was the API's error body at all.
    `detail` is the sentence, or, when the refusal says more, `{"message": sentence, **the other members}`."""

    code: str
    detail: Any
    parsed: bool


def refusal_of(response: httpx.Response) -> Refusal:
    try:
        body = _ErrorBody.model_validate_json(response.content)
    except ValueError:
        return Refusal("error", None, parsed=False)
    extra = {k: v for k, v in (body.model_extra or {}).items() if k not in _PROBLEM_MEMBERS}
    detail = {"message": body.detail, **extra} if extra else body.detail
    return Refusal(str(body.error or "error"), detail, parsed=True)


def no_cookie_jar(client: httpx.AsyncClient) -> httpx.AsyncClient:
    """A client shared by many callers must not keep one caller's Set-Cookie for the next: its jar accepts
    nothing (each caller sends its own credential on each request)."""
    client.cookies.jar.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    return client


def shared_http(
    base_url: str, *, transport: httpx.AsyncBaseTransport | None = None, timeout: float | httpx.Timeout = 30.0
) -> httpx.AsyncClient:
    """A new client meant to be kept for the process's lifetime (one per API base URL), with no cookie jar."""
    return no_cookie_jar(httpx.AsyncClient(base_url=base_url, transport=transport, timeout=timeout))


class ApiClient:
    """Sends requests over `http` (shared, not owned: closing it is its opener's job).

    Hooks a caller overrides: `auth_headers` (its credential on every request), `refused` (the exception a
    4xx/5xx answer becomes) and `unreachable` (the exception no answer at all becomes)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    def auth_headers(self) -> dict[str, str]:
        return {}

    def refused(self, response: httpx.Response, refusal: Refusal) -> Exception:
        return httpx.HTTPStatusError(
            f"{response.status_code} {refusal.code}", request=response.request, response=response
        )

    def unreachable(self, exc: httpx.HTTPError) -> Exception:
        return exc

    def clean_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Query parameters left as None are not sent."""
        return {k: v for k, v in params.items() if v is not None}

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        # the id of the request (a console page, an event) this call is made for, or a fresh one (backend/observe.py)
        merged = {REQUEST_ID_HEADER: outgoing_request_id(), **self.auth_headers(), **(headers or {})}
        try:
            response = await self.http.request(
                method,
                current(path),
                headers=merged,
                params=self.clean_params(params) if params else None,
                **kwargs,
            )
        except httpx.HTTPError as exc:
            error = self.unreachable(exc)
            if error is exc:
                raise
            raise error from exc
        if response.status_code >= 400:
            raise self.refused(response, refusal_of(response))
        return response

    async def call(self, shape: type[T] | Any, method: str, path: str, **kwargs: Any) -> T:
        """One request whose answer is decoded as `shape`."""
        decoded: T = decode(shape, await self.send(method, path, **kwargs))
        return decoded
