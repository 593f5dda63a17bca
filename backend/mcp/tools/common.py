"""What every tool module shares: how it reaches the API, its annotations, statuses, links and error handling."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from backend.drive.schemas import DriveFileInfo
from backend.flows.schemas import FlowDetail, FlowStep
from backend.flows.status import FLOW_FINISHED
from backend.mcp.api import ApiError, CleanroomApi
from backend.mcp.tools.models import Limits
from backend.runs.status import FINISHED, RunStatus
from backend.runs.status import RETRYABLE as RETRYABLE

log = logging.getLogger("cleanroom.mcp")

Connector = Callable[[Context], CleanroomApi]


@dataclass(frozen=True)
class Setup:
    """What a tool module's `register` gets: how a call reaches the API, and the settings it shows."""

    connect: Connector
    console: str  # the console's URL, for approval links
    row_cap: int  # the export row cap


READONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
PROPOSES = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)

FINAL = (*FINISHED, RunStatus.rejected)  # a run that will not change any more
FLOW_FINAL = FLOW_FINISHED
TEXT_KINDS = ("csv", "text", "json", "markdown")
TEXT_SUFFIXES = (".csv", ".txt", ".json", ".md", ".tsv", ".log", ".html", ".xml", ".yaml", ".yml")
FILE_URI = "cleanroom://runs/{run_id}/files/{name}"

MIME_BY_SUFFIX = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".txt": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".json": "application/json",
    ".html": "text/html",
    ".xml": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".pdf": "application/pdf",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


@contextmanager
def tool_errors(what: str) -> Iterator[None]:
    """Every refusal becomes a tool error the model can read; nothing unexpected leaks a stack trace."""
    try:
        yield
    except ToolError:
        raise
    except ApiError as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:
        log.exception("MCP %s failed", what)
        raise ToolError(
            f"{what} failed inside the Cleanroom MCP server ({type(exc).__name__}); the operator's log has details"
        ) from None


def run_page(console_url: str, run_id: int) -> str:
    return f"{console_url.rstrip('/')}/runs/{run_id}"


def flow_page(console_url: str, flow_id: int) -> str:
    return f"{console_url.rstrip('/')}/flows/{flow_id}"


def file_uri(run_id: int, name: str) -> str:
    return FILE_URI.format(run_id=run_id, name=quote(name, safe=""))


def mime_for(name: str, data: bytes | None = None) -> str:
    if data is not None:
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            return "image/png"
        if data.startswith(b"\xff\xd8\xff"):
            return "image/jpeg"
    lower = name.lower()
    for suffix, mime in MIME_BY_SUFFIX.items():
        if lower.endswith(suffix):
            return mime
    return "application/octet-stream"


def is_text(row: DriveFileInfo) -> bool:
    return row.kind in TEXT_KINDS or row.name.lower().endswith(TEXT_SUFFIXES)


def new_conversation() -> str:
    return f"mcp-{uuid.uuid4().hex[:12]}"


def limits_body(limits: Limits | None) -> dict[str, int] | None:
    if limits is None:
        return None
    values = limits.model_dump(exclude_none=True)
    return values or None


def stopped(flow: FlowDetail) -> FlowStep | None:
    """The step that stopped a failed flow: the first that neither succeeded nor was skipped."""
    return next((s for s in flow.steps if s.run.status not in (RunStatus.succeeded, RunStatus.skipped)), None)
