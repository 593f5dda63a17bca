"""`cleanroom records --as EMAIL DATASET [--format json|csv]`: what the app shows that user."""

from __future__ import annotations

import json
from typing import Any

import typer

from backend.cli.support import run_db


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("records")
    def records(
        dataset: str = typer.Argument(..., help="e.g. deals, tasks, employees"),
        as_email: str = typer.Option(..., "--as", help="show what this user sees"),
        fmt: str = typer.Option("json", "--format", help="json or csv"),
    ) -> None:
        """Print the records of DATASET that a user sees in the app (same service as the API)."""
        from backend.records import service
        from backend.records.export import build_export
        from backend.records.visibility import get_dataset
        from backend.tenancy.context import load_user_context_by_email

        if fmt not in ("json", "csv"):
            raise typer.BadParameter("--format must be json or csv")

        async def go() -> tuple[Any, list[dict[str, Any]]]:
            ctx = await load_user_context_by_email(as_email)
            items: list[dict[str, Any]] = []
            page = 1
            while True:
                result = await service.list_records(ctx, dataset, page=page, page_size=service.MAX_PAGE_SIZE)
                items.extend(result.items)
                if len(items) >= result.total or not result.items:
                    break
                page += 1
            return await get_dataset(ctx.company_id, dataset), items

        found, items = run_db(go)
        columns = found.export_columns
        if fmt == "json":
            typer.echo(json.dumps([{c: r.get(c) for c in columns} for r in items], default=_cell, indent=1))
        else:
            typer.echo(build_export(found, items).csv.decode(), nl=False)
