"""`HostClient`: the worker API (`/api/worker`) as a fleet host's agent speaks it, on the typed client's
`ApiClient`: one method per endpoint, the request bodies as the API's own schemas (`fleet/schemas.py`), every
answer decoded into one, a refusal raised as `HostRefused` (an `httpx.HTTPStatusError` with what the API
said). An API that does not answer at all is tried again with backoff before `ApiUnavailable`.

It imports the client's sender and the worker API's schemas only: no table, no service, no web framework."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from backend.client.http import ApiClient, Refusal, current, decode, shared_http
from backend.fleet.schemas import Done, HeartbeatBody, HostBody, Job, RefuseBody, Registered
from backend.observe import REQUEST_ID_HEADER, outgoing_request_id

log = logging.getLogger("cleanroom.fleet.host")
RETRIES = 6  # an unreachable API: tried again with backoff (0.5 s … 16 s) before a call is given up
PROBLEM_MAX = 2000  # `RefuseBody.problem`'s own bound: a longer account is cut, not refused


class ApiUnavailable(RuntimeError):
    pass


class HostRefused(httpx.HTTPStatusError):
    """The API answered with an error status; `refusal` is what its problem document said."""

    def __init__(self, response: httpx.Response, refusal: Refusal) -> None:
        super().__init__(
            f"{response.status_code} {refusal.code}: {refusal.detail}",
            request=response.request,
            response=response,
        )
        self.refusal = refusal

    @property
    def status(self) -> int:
        return self.response.status_code


class HostClient(ApiClient):
    """One host's calls, with its enrollment token (`Bearer cwt_…`) on each. It owns its `httpx.AsyncClient`
    (one per host process): `aclose` closes it."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        super().__init__(http)
        self.token = token

    @classmethod
    def to(cls, api_url: str, token: str) -> HostClient:
        return cls(shared_http(api_url.rstrip("/"), timeout=120.0), token)

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def refused(self, response: httpx.Response, refusal: Refusal) -> Exception:
        return HostRefused(response, refusal)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send(  # `attempts` and `body` added to ApiClient.send
        self,
        method: str,
        path: str,
        *,
        attempts: int = RETRIES,
        body: Callable[[], AsyncIterator[bytes]] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """`ApiClient.send`, tried again while the API is unreachable; `body`, if given, makes the request's
        streamed content afresh for each attempt."""
        delay = 0.5
        for attempt in range(attempts):
            try:
                if body is not None:
                    kwargs["content"] = body()
                return await super().send(method, path, **kwargs)
            except httpx.TransportError as exc:
                if attempt == attempts - 1:
                    raise ApiUnavailable(f"{method} {path}: {exc}") from exc
                log.warning("API unreachable (%s); again in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 16)
        raise AssertionError("unreachable")

    # --- the host ------------------------------------------------------------------------------------

    async def register(self, body: HostBody) -> Registered:
        return decode(Registered, await self.send("POST", "/api/worker/hosts", json=body.model_dump()))

    async def heartbeat(self, body: HeartbeatBody) -> None:
        """Once, not retried: the next beat is the retry. A 409 (declared lost meanwhile) is `HostRefused`."""
        await self.send("POST", "/api/worker/heartbeat", json=body.model_dump(), attempts=1)

    async def leave(self) -> None:
        await self.send("POST", "/api/worker/leave", attempts=1)

    # --- one run -------------------------------------------------------------------------------------

    async def claim(self, run_id: int) -> Job:
        return decode(Job, await self.send("POST", f"/api/worker/runs/{run_id}/claim"))

    async def refuse(self, run_id: int, why: str) -> Done:
        return decode(Done, await self.send("POST", f"/api/worker/runs/{run_id}/refuse", json=_body(why)))

    async def vm_started(self, run_id: int) -> Done:
        return decode(Done, await self.send("POST", f"/api/worker/runs/{run_id}/vm-started"))

    async def release(self, run_id: int, why: str) -> Done:
        return decode(Done, await self.send("POST", f"/api/worker/runs/{run_id}/release", json=_body(why)))

    async def send_result(self, signed_url: str, chunks: Callable[[], AsyncIterator[bytes]]) -> Done:
        """The result's tar to the run's signed URL, made afresh for each attempt while it is sent."""
        response = await self.send(
            "POST", signed_url, body=chunks, headers={"Content-Type": "application/x-tar"}
        )
        return decode(Done, response)

    @contextlib.asynccontextmanager
    async def download(self, signed_url: str) -> AsyncIterator[httpx.Response]:
        """A signed URL's tar as a stream (the caller reads `aiter_bytes` and checks the status itself)."""
        headers = {REQUEST_ID_HEADER: outgoing_request_id(), **self.auth_headers()}
        async with self.http.stream("GET", current(signed_url), headers=headers) as response:
            yield response


def _body(why: str) -> dict[str, Any]:
    return RefuseBody(problem=why[:PROBLEM_MAX]).model_dump()
