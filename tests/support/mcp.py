"""The real API server for the MCP tests, and the SDK's own clients (streamable HTTP and stdio) against it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.support.servers import REPO, Servers, wait_for

ACME_ADMIN = "admin@acme.example"
MARIA = "maria@acme.example"
BOB = "bob@acme.example"
GINA = "gina@globex.example"
GLOBEX_ADMIN = "admin@globex.example"


@dataclass
class ApiServer(Servers):
    """Only the API (with its in-process worker), seeded with the demo companies: `serve --no-console`."""

    def start(self) -> ApiServer:
        self.seed()
        log = open(self.data_dir / "api.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "backend", "serve", "--no-console"],
                env=self.env(),
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        try:
            wait_for(self.api_url + "/api/health")
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def mcp_url(self) -> str:
        return self.api_url + "/mcp"

    @contextmanager
    def session(self, email: str, password: str = "demo") -> Iterator[httpx.Client]:
        """A person signed in (session cookie; changes carry the API's Origin, as the console's would)."""
        with httpx.Client(base_url=self.api_url, headers={"Origin": self.api_url}, timeout=60) as client:
            r = client.post("/api/auth/login", json={"email": email, "password": password})
            assert r.status_code == 200, r.text
            yield client

    def token(self, email: str) -> tuple[str, int]:
        """A fresh personal API token of `email`, minted in that person's session: (token, token id)."""
        with self.session(email) as person:
            r = person.post("/api/me/tokens", json={"name": "mcp test"})
            assert r.status_code == 201, r.text
            return r.json()["token"], r.json()["id"]

    def approve(self, email: str, run_id: int) -> httpx.Response:
        """The person approves in a session with the hashes the approval screen shows."""
        with self.session(email) as person:
            run = person.get(f"/api/runs/{run_id}").json()
            hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
            return person.post(f"/api/runs/{run_id}/approve", json=hashes)

    def approve_flow(self, email: str, flow_id: int) -> httpx.Response:
        """The person approves a whole flow in a session, with every step's hashes as the screen shows them."""
        with self.session(email) as person:
            flow = person.get(f"/api/flows/{flow_id}").json()
            hashes = [
                {"code_sha256": s["run"]["code_sha256"], "bundle_sha256": s["run"]["bundle_sha256"]}
                for s in flow["steps"]
            ]
            return person.post(f"/api/flows/{flow_id}/approve", json={"steps": hashes})


@asynccontextmanager
async def http_client(server: ApiServer, token: str) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP to /mcp, sending the token as a bearer header."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
        ) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def stdio_client(server: ApiServer, token: str) -> AsyncIterator[Client]:
    """The SDK's client launching `python -m backend mcp --api URL` with CLEANROOM_TOKEN."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        {"CLEANROOM_TOKEN": token, "CLEANROOM_CONSOLE_URL": server.console_url, "PYTHONPATH": str(REPO)}
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "backend", "mcp", "--api", server.api_url],
        env=env,
        cwd=str(REPO),
    )
    async with Client(params) as client:
        yield client


class StdioClients:
    """One `cleanroom mcp` stdio process per person for the whole test session, each holding a token of that
    person minted when it starts: starting one is an interpreter importing the MCP SDK and the client (about 2
    CPU-seconds, 8-10 s of a test under load), which a test paid for each stdio client before. The clients live
    in an event loop of their own in a thread (a test's loop ends with its test); a test awaits their calls
    from its own loop through `_Remote`. A person whose client has failed (its holder ended) gets a new one."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-stdio-clients", daemon=True)
        self.thread.start()
        self.held: dict[str, tuple[_Remote, asyncio.Event, concurrent.futures.Future[None]]] = {}

    def client(self, email: str) -> _Remote:
        held = self.held.get(email)
        if held is not None and not held[2].done():
            return held[0]
        token, _ = self.server.token(email)
        ready: concurrent.futures.Future[Client] = concurrent.futures.Future()
        stop = asyncio.Event()
        holding = asyncio.run_coroutine_threadsafe(self._hold(token, ready, stop), self.loop)
        remote = _Remote(ready.result(timeout=120), self.loop)
        self.held[email] = (remote, stop, holding)
        return remote

    async def _hold(self, token: str, ready: concurrent.futures.Future[Client], stop: asyncio.Event) -> None:
        try:
            async with stdio_client(self.server, token) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            raise

    @asynccontextmanager
    async def connect(self, email: str) -> AsyncIterator[Client]:
        """As `stdio_client`, but the person's running process (the `connect` fixture's stdio transport)."""
        yield self.client(email)  # type: ignore[misc] - the Client's calls, awaited from this loop

    def close(self) -> None:
        for _, stop, _ in self.held.values():
            self.loop.call_soon_threadsafe(stop.set)
        for _, _, holding in self.held.values():
            with contextlib.suppress(Exception):  # a process a test broke has failed that test already
                holding.result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=60)
        self.loop.close()


class _Remote:
    """A `Client` living in `StdioClients`'s loop, called from a test's loop: its coroutine methods run there."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: object, **kwargs: object) -> object:
            return await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), self._loop)
            )

        return call


def structured(result: CallToolResult) -> dict:
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
