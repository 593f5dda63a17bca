"""Cleanroom's MCP tools, implemented once as a client of the HTTP API with the caller's token.

`build_server(connect, console_url=...)` returns an `MCPServer`; `connect(ctx)` hands each call a
`CleanroomApi` bound to the caller's token (from the HTTP request's `Authorization` header on `/mcp`, from
`CLEANROOM_TOKEN` over stdio). No tool approves, rejects, accepts or changes settings: those are a person's
decisions, made in the console, and the API refuses them to a token anyway.

Each tool module registers its own tools: `datasets` (list_datasets), `drive` (list_drive_files,
search_drive), `runs` (propose_run, revise_run, ask_followup, get_run and the run-file resources) and `flows`
(propose_flow, get_flow). They share `models` (the API's schemas, subclassed where MCP adds fields or
descriptions), `views` (API JSON to those models), `render` (the one renderer: a model to the text and
structured content of a result), `waiting` (the polls behind wait_seconds) and `common`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mcp.server.mcpserver import MCPServer

from backend.mcp.contract import instructions
from backend.mcp.tools import datasets, drive, flows, runs
from backend.mcp.tools.common import Connector, Setup, mime_for
from backend.settings import get_settings

MODULES = (datasets, drive, runs, flows)  # the order the tools are listed in


class CleanroomMCP(MCPServer):
    """MCPServer whose run-file resources carry each file's own MIME type (a template has only one)."""

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        results = await super().read_resource(uri, context)
        if not isinstance(results, list):
            return results
        return [replace(item, mime_type=mime_for(str(uri), _as_bytes(item.content))) for item in results]


def _as_bytes(content: str | bytes) -> bytes | None:
    return content if isinstance(content, bytes) else None


def build_server(
    connect: Connector, *, console_url: str | None = None, name: str = "cleanroom", **auth: Any
) -> MCPServer:
    """`auth`: the SDK's `auth=AuthSettings(...)` and `token_verifier=` for the HTTP endpoint (none over stdio)."""
    settings = get_settings()
    mcp = CleanroomMCP(
        name,
        title="Cleanroom",
        description="Python on the company's data, run in a fresh no-network VM after a person approves it.",
        instructions=instructions(),
        version="0.1.0",
        log_level="WARNING",
        **auth,
    )
    setup = Setup(connect, console_url or settings.effective_console_url, settings.export_row_cap)
    for module in MODULES:
        module.register(mcp, setup)
    return mcp
