"""list_drive_files and search_drive: the Drive files this user may read, with their folders' paths."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from backend.mcp.api import CleanroomApi
from backend.mcp.tools import render
from backend.mcp.tools.common import READONLY, Setup, tool_errors
from backend.mcp.tools.models import DriveFile, DriveFileList


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
