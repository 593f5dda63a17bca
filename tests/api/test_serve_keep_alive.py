"""The API keeps an idle connection open longer than its clients keep theirs (issue 30). httpx, which the MCP SDK
and most Python clients use, keeps an idle connection 5 s, uvicorn's default too: a client then sent its next
request on a connection just as the server closed it, and got "Server disconnected without sending a
response" (the control-plane bench at 1,000 assistants: 10 such failures in each of two runs at 5 s, none in
two at 20 s). Here a real uvicorn with the value `cleanroom serve` passes keeps a connection that sat idle past
httpx's 5 s and answers on it; the control, uvicorn's default, has closed it."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
import uvicorn

from backend.cli.serve import KEEP_ALIVE_SECONDS

IDLE = 6.0  # past httpx's keep-alive (5 s) and uvicorn's default


async def _ok(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _second_request_after_idle(keep_alive: float) -> bytes:
    server = uvicorn.Server(
        uvicorn.Config(_ok, host="127.0.0.1", port=0, timeout_keep_alive=keep_alive, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        request = b"GET / HTTP/1.1\r\nHost: api\r\n\r\n"
        writer.write(request)
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        await asyncio.sleep(IDLE)
        with contextlib.suppress(ConnectionError):
            writer.write(request)
            await writer.drain()
        try:
            answer = await asyncio.wait_for(reader.read(4096), 5)
        except ConnectionError:  # closed under the request: no answer either
            answer = b""
        writer.close()
        return answer
    finally:
        server.should_exit = True
        await serving


DEFAULT = uvicorn.Config(_ok).timeout_keep_alive


@pytest.fixture(scope="module")
def answers() -> dict[float, bytes]:
    """Both servers' second requests, their idle waits side by side (each its own server and connection)."""

    async def both() -> list[bytes]:
        return list(
            await asyncio.gather(*(_second_request_after_idle(k) for k in (KEEP_ALIVE_SECONDS, DEFAULT)))
        )

    kept, default = asyncio.run(both())
    return {KEEP_ALIVE_SECONDS: kept, DEFAULT: default}


def test_the_api_keeps_idle_connections_longer_than_httpx_does() -> None:
    assert KEEP_ALIVE_SECONDS > IDLE > httpx.Limits().keepalive_expiry


def test_a_request_after_httpxs_keep_alive_is_answered_on_the_same_connection(answers) -> None:
    assert answers[KEEP_ALIVE_SECONDS].startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("default", [DEFAULT])
def test_control_with_uvicorns_default_the_connection_is_closed_by_then(answers, default: float) -> None:
    assert default < IDLE
    assert answers[default] == b""  # closed: no answer
