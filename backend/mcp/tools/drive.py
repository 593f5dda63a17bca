"""list_drive_files and search_drive: the Drive files this user may read, with their folders' paths;
upload_file: a file into this user's Drive, within the same limits as any upload (the API checks size,
quotas, hourly count and name, and refuses a Word document it could not read)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import Field

from backend.mcp.api import CleanroomApi
from backend.mcp.tools import render
from backend.mcp.tools.common import PROPOSES, READONLY, Setup, tool_errors
from backend.mcp.tools.models import DriveFile, DriveFileList, UploadedFile
from backend.settings import get_settings


def register(mcp: MCPServer, setup: Setup) -> None:
    connect = setup.connect

    @mcp.tool(annotations=READONLY)
    async def list_drive_files(
        ctx: Context,
        folder: Annotated[
            str | None,
            Field(description="only files in folders whose path contains this text (case-insensitive)"),
        ] = None,
        include_run_outputs: Annotated[
            bool, Field(description="also list files earlier runs produced")
        ] = False,
        limit: Annotated[int, Field(ge=1, le=500, description="at most this many files")] = 200,
    ) -> Annotated[CallToolResult, DriveFileList]:
        """Drive files this user may read, with folder, type and size. Pass a file's id in propose_run's
        `files` to stage it (converted to text/CSV under /work/input/files/...)."""
        with tool_errors("list_drive_files"):
            files = await _drive(connect(ctx), include_run_outputs)
            if folder:
                files = [f for f in files if folder.lower() in (f.folder or "").lower()]
            return render.as_json(DriveFileList(files=files[:limit], total=len(files)))

    @mcp.tool(annotations=READONLY)
    async def search_drive(
        ctx: Context,
        query: Annotated[
            str,
            Field(min_length=1, max_length=200, description="words to find in file names and folder paths"),
        ],
        include_run_outputs: Annotated[
            bool, Field(description="also search files earlier runs produced")
        ] = True,
        limit: Annotated[int, Field(ge=1, le=200, description="at most this many files")] = 50,
    ) -> Annotated[CallToolResult, DriveFileList]:
        """Find Drive files this user may read whose name or folder contains every word of the query."""
        with tool_errors("search_drive"):
            words = [w.lower() for w in query.split()]
            files = await _drive(connect(ctx), include_run_outputs)
            hits = [f for f in files if all(w in f"{f.folder or ''}/{f.name}".lower() for w in words)]
            return render.as_json(DriveFileList(files=hits[:limit], total=len(hits), query=query))

    @mcp.tool(annotations=PROPOSES)
    async def upload_file(
        ctx: Context,
        name: Annotated[
            str,
            Field(min_length=1, max_length=255, description="file name with its extension, e.g. notes.md"),
        ],
        content: Annotated[str, Field(description="the file's content: text, or base64 (see encoding)")],
        encoding: Annotated[
            Literal["text", "base64"],
            Field(description="text (stored as UTF-8) or base64 (any file: .xlsx, .pdf, .docx, images)"),
        ] = "text",
        folder_id: Annotated[
            int | None, Field(description="a folder id from the Drive; the top level when omitted")
        ] = None,
        visibility: Annotated[
            Literal["private", "team", "company"],
            Field(description="who sees it: this user only (private), their team, or the company"),
        ] = "private",
    ) -> Annotated[CallToolResult, UploadedFile]:
        """Upload a file into this user's Drive, as this user: the same limits as any upload apply (size
        per file, the person's and the company's Drive quotas, uploads per hour, file names). Its id can
        then go into propose_run's `files`. Only the person can delete files or change who sees them."""
        with tool_errors("upload_file"):
            data = _decode(content, encoding, name)
            api = connect(ctx)
            uploaded = await api.upload_file(name, data, folder_id=folder_id, visibility=visibility)
            quota = await api.drive_quota()
            return render.as_json(
                UploadedFile(
                    file=uploaded,
                    user_used_bytes=quota.user_used_bytes,
                    user_quota_bytes=quota.user_quota_bytes,
                )
            )


def _decode(content: str, encoding: str, name: str) -> bytes:
    """The file's bytes, no more than the upload limit (counted before decoding: a huge string is not
    decoded at all)."""
    limit = get_settings().max_upload_bytes
    if len(content) > (limit // 3 + 1) * 4 + 4:  # base64's length for `limit` bytes bounds either form
        raise ToolError(f"{name} is over the limit per file of {limit:,} bytes; nothing was uploaded")
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("content is not valid base64; nothing was uploaded") from None
    else:
        data = content.encode("utf-8")
    if len(data) > limit:
        raise ToolError(
            f"{name} is {len(data):,} bytes, over the limit per file of {limit:,}; nothing was uploaded"
        )
    return data


async def _drive(api: CleanroomApi, include_run_outputs: bool) -> list[DriveFile]:
    files = await api.drive_files(all="true")
    if not include_run_outputs:
        files = [f for f in files if not f.run_id]
    paths = await _folder_paths(api, {f.folder_id for f in files if f.folder_id})
    return [
        DriveFile.model_validate(
            {
                **f.model_dump(),
                "folder": paths.get(f.folder_id) if f.folder_id else None,
                "type": f.kind or "file",
            }
        )
        for f in files
    ]


async def _folder_paths(api: CleanroomApi, wanted: set[int], max_listings: int = 60) -> dict[int, str]:
    """Folder id → "A/B/C" for the folders holding the listed files (a breadth-first walk, bounded)."""
    paths: dict[int, str] = {}
    queue: list[tuple[int | None, str]] = [(None, "")]
    listings = 0
    while queue and listings < max_listings and not wanted <= paths.keys():
        parent, prefix = queue.pop(0)
        listings += 1
        for folder in await api.drive_folders(parent_id=parent):
            path = f"{prefix}/{folder.name}" if prefix else folder.name
            paths[folder.id] = path
            queue.append((folder.id, path))
    return paths
