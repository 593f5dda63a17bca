"""list_datasets: the business datasets this user may read, with their columns and row counts."""

from __future__ import annotations

import asyncio
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult

from backend.mcp.tools import render
from backend.mcp.tools.common import READONLY, Setup, tool_errors
from backend.mcp.tools.models import Column, DatasetList, DatasetListing
from backend.records.columns import ColumnKind


def register(mcp: MCPServer, setup: Setup) -> None:
    connect, cap = setup.connect, setup.row_cap

    @mcp.tool(annotations=READONLY)
    async def list_datasets(ctx: Context) -> Annotated[CallToolResult, DatasetList]:
        """The business datasets this user may read (others are not listed), with their columns and types, how
        many rows the user can see, and whether a run's export would be cut at the row cap. A run gets each
        dataset named in propose_run as /work/input/datasets/<name>.csv."""
        with tool_errors("list_datasets"):
            api = connect(ctx)
            listed = await api.datasets()
            readable = [d for d in listed if d.access]
            pages = await asyncio.gather(*(api.records(d.name, page_size=1) for d in readable))
            out = []
            for d, page in zip(readable, pages, strict=True):
                total = int(page.total or 0)
                out.append(
                    DatasetListing(
                        **d.model_dump(),
                        columns=[Column(name=c, type=d.types.get(c) or ColumnKind.string) for c in d.fields],
                        visible_rows=total,
                        export_rows=min(total, cap),
                        export_truncated=total > cap,
                    )
                )
            return render.as_json(DatasetList(datasets=out, export_row_cap=cap))
