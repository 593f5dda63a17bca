"""`Server-Timing: app;dur=<ms>` on every answer when `server_timing` is set: the time from a request reaching
the app to its answer's headers going out. A client's own clock adds the network and its own delays (the
control-plane bench's clients share the machine with the API and are late themselves: its report gives
both, and the difference is the bench's, not the API's). Off by default: nobody needs it but a measurement."""

from __future__ import annotations

import time

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "server-timing"
METRIC = "app;dur="


class ServerTiming(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        began = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = f"{METRIC}{(time.perf_counter() - began) * 1000:.2f}".encode()
                message["headers"] = [*message.get("headers", ()), (HEADER.encode(), took)]
            await send(message)

        await next_app(scope, receive, timed)


def app_ms(header: str | None) -> float | None:
    """The app's time from an answer's Server-Timing header, None when it has none."""
    if not header or not header.startswith(METRIC):
        return None
    try:
        return float(header[len(METRIC) :].split(",")[0])
    except ValueError:
        return None
