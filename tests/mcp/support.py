"""The real API server for the MCP tests, and the SDK's own clients (streamable HTTP and stdio) against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.console.servers import REPO, Servers, wait_for

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


def structured(result: CallToolResult) -> dict:
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)
