"""`cleanroom stage`, `cleanroom scan` and `cleanroom bench staging`.

The staging service, the scanner and the database load inside the commands, not when the CLI starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from backend.benches import add_suite
from backend.cli.support import run_db


def _staging_suite() -> dict[str, Any]:
    """The `staging` suite: `backend.benches.staging.bench_staging` with its defaults, imported when it runs."""
    from backend.benches.staging import bench_staging as run

    return run()


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    register_scan(app)
    add_suite(
        bench_app,
        "staging",
        _staging_suite,
        "Stage and scan all 12 datasets at the 5,000-row cap (demo admin, SQLite): median and p95 in ms.",
    )

    @app.command("stage")
    def stage(
        as_email: str = typer.Option(..., "--as", help="stage what this user may see"),
        datasets: str = typer.Option("", "--datasets", help="comma-separated, e.g. deals,tasks"),
        files: str = typer.Option("", "--files", help="comma-separated Drive file ids"),
        out: Path = typer.Option(..., "--out", help="an empty or new folder"),
    ) -> None:
        """Write exactly the bundle a run would get: manifest.json plus files, and print the findings."""
        try:
            file_ids = [int(x) for x in files.split(",") if x.strip()]
        except ValueError as exc:
            raise typer.BadParameter("--files takes comma-separated numeric Drive file ids") from exc
        from backend.staging import service
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> service.StagedBundle:
            ctx = await load_user_context_by_email(as_email)
            return await service.stage(ctx, datasets.split(","), file_ids, out)

        bundle = run_db(go)
        for entry in bundle.manifest["files"]:
            extra = ""
            if entry.get("truncated"):
                extra = f"  TRUNCATED ({entry.get('visible_total', entry.get('total_rows'))} visible)"
            rows = f"{entry['rows']} rows" if "rows" in entry else f"{entry['bytes']} bytes"
            typer.echo(f"{entry['path']}: {rows}{extra}")
        for err in bundle.manifest["errors"]:
            typer.echo(f"NOT STAGED {err['name']}: {err['error']}", err=True)
        for f in bundle.findings:
            where = " › ".join(str(x) for x in (f.path, f.sheet, f.row, f.column) if x is not None)
            typer.echo(f"WARNING [{f.severity}] {f.category} at {where}: {f.excerpt}")
        typer.echo(f"bundle {bundle.bundle_sha256}")
        typer.echo(f"manifest {bundle.directory / service.MANIFEST}")


def register_scan(app: typer.Typer) -> None:
    @app.command("scan")
    def scan(
        files: list[Path] = typer.Argument(..., exists=True, dir_okay=False, readable=True),
        json_out: bool = typer.Option(False, "--json", help="print {'findings': [...]}"),
    ) -> None:
        """Injection findings for CSV, XLSX, ODS, PDF, TXT and image files (converted as staging would)."""
        from backend.staging import service

        findings, errors = service.scan_files([(str(f), f.read_bytes()) for f in files])
        if json_out:
            typer.echo(
                json.dumps({"findings": [f.model_dump() for f in findings], "errors": errors}, indent=1)
            )
        else:
            for f in findings:
                where = " › ".join(str(x) for x in (f.path, f.sheet, f.row, f.column) if x is not None)
                typer.echo(f"[{f.severity}] {f.category} at {where}: {f.excerpt}")
                if f.reason:
                    typer.echo(f"    why: {f.reason}")
            for err in errors:
                typer.echo(f"could not read {err['path']}: {err['error']}", err=True)
            typer.echo(f"{len(findings)} finding(s) in {len(files)} file(s)")
        if errors:
            raise typer.Exit(2)
