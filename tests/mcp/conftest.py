"""One real API server (uvicorn, its worker, a freshly seeded demo database) for the MCP tests, and the SDK's own
client over both transports: streamable HTTP to `/mcp`, and stdio to `python -m backend mcp --api URL`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager

import pytest
from mcp import Client

from tests.support.mcp import ApiServer, StdioClients, http_client

TRANSPORTS = ("http", "stdio")


@pytest.fixture(scope="session")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    server = ApiServer(tmp_path_factory.mktemp("mcp-api")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def stdio_clients(api_server: ApiServer) -> Iterator[StdioClients]:
    """The stdio transport's `cleanroom mcp` processes, one per person, started when first used."""
    clients = StdioClients(api_server)
    try:
        yield clients
    finally:
        clients.close()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def connect(
    api_server: ApiServer, transport: str, request: pytest.FixtureRequest
) -> Callable[[str], AbstractAsyncContextManager[Client]]:
    """connect(email): the SDK client over this test's transport holding a token of `email`: over HTTP a new
    session with a fresh token; over stdio that person's `cleanroom mcp` process of this test session
    (`StdioClients`: the same process and protocol, started once instead of for every test)."""

    def _connect(email: str) -> AbstractAsyncContextManager[Client]:
        if transport == "stdio":
            return request.getfixturevalue("stdio_clients").connect(email)
        token, _ = api_server.token(email)
        return http_client(api_server, token)

    return _connect
