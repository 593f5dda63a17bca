"""One real API server (uvicorn, its worker, a freshly seeded demo database) for the MCP tests, and the SDK's own
client over both transports: streamable HTTP to `/mcp`, and stdio to `python -m backend mcp --api URL`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager

import pytest
from mcp import Client

from tests.mcp.support import ApiServer, http_client, stdio_client

TRANSPORTS = {"http": http_client, "stdio": stdio_client}


@pytest.fixture(scope="session")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(tmp_path_factory.mktemp("mcp-api")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=sorted(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def connect(api_server: ApiServer, transport: str) -> Callable[[str], AbstractAsyncContextManager[Client]]:
    """connect(email): the SDK client over this test's transport, holding a fresh token of `email`."""

    def _connect(email: str) -> AbstractAsyncContextManager[Client]:
        token, _ = api_server.token(email)
        return TRANSPORTS[transport](api_server, token)

    return _connect
