"""`cleanroom datasets import | source | sync`: file imports and PostgreSQL syncs of company-defined datasets, as
an operator scripts them (acting as a person with `--as`; the same service, checks and audit entries as the
API), and the `imports` bench."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

from backend.cli.datasets import DATASETS_APP
from backend.cli.support import fail, run_db


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(report, indent=1, default=str))
        return
    what = "imported" if report["applied"] else "dry run (nothing written)"
    typer.echo(
        f"{report['dataset']}: {what}: {report['rows_read']} rows read, {report['added']} added, "
        f"{report['changed']} changed, {report['unchanged']} unchanged, {report['refused']} refused"
    )
    for refusal in report["refusals"]:
        typer.echo(f"  row {refusal['row']}: {refusal['reason']}")
    if report["refusals_not_listed"]:
        typer.echo(f"  … and {report['refusals_not_listed']} more refusals")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    from backend import benches
    from backend.benches import imports as imports_bench

    benches.add_suite(
        bench_app,
        "imports",
        imports_bench.run,
        "Company-defined datasets on PostgreSQL: a 1,000,000-row x 12-column CSV import (rows/s, peak RSS) "
        "and an incremental sync of 10,000 changed rows out of 1,000,000.",
    )

    @DATASETS_APP.command("import")
    def import_file(
        name: str = typer.Argument(..., help="the dataset (new with --new)"),
        file: Path = typer.Argument(..., exists=True, dir_okay=False, help="CSV, XLSX or ODS"),
        as_email: str = typer.Option(
            ..., "--as", help="the person importing (an admin, or edit on the dataset)"
        ),
        apply: bool = typer.Option(False, "--apply", help="write; without it only a dry run"),
        new: bool = typer.Option(False, "--new", help="define the dataset from the file's inferred columns"),
        label: str = typer.Option("", "--label"),
        key: str = typer.Option("", "--key", help="the key column (--new)"),
        kinds: list[str] = typer.Option([], "--kind", help="override an inferred kind: column=kind (--new)"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Import FILE into dataset NAME (upsert by its key). Shows the inferred kinds with --new."""
        from backend.records import defined, importing
        from backend.records.values import ColumnSpec
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> dict[str, Any]:
            ctx = await load_user_context_by_email(as_email)
            spec = None
            if new:
                preview = await importing.preview_file(ctx, file, file.name)
                overrides = dict(k.split("=", 1) for k in kinds if "=" in k)
                columns = []
                for c in preview["columns"]:
                    if c["name"] in overrides:
                        c = {**c, "kind": overrides[c["name"]]}
                        c["max_length"] = c["max_length"] if c["kind"] == "string" else None
                    columns.append(ColumnSpec.read(c))
                if not as_json:
                    typer.echo("columns (inferred; override with --kind column=kind):")
                    for c in columns:
                        typer.echo(f"  {c.name}\t{c.kind}")
                spec = defined.DatasetSpec(
                    name=name, label=label or name, columns=columns, key_column=key or columns[0].name
                )
            return await importing.import_file(
                ctx,
                name,
                file,
                file.name,
                dry_run=not apply,
                create=spec,
                progress=None if as_json else shown,
            )

        def shown(rows: int) -> None:  # the import's progress hook: one line rewritten on the terminal
            typer.echo(f"\r{rows:,} rows read", nl=False, err=True)

        report = run_db(go)
        if not as_json:
            typer.echo("", err=True)  # past the progress line
        _print_report(report, as_json)

    @DATASETS_APP.command("source")
    def source(
        name: str = typer.Argument(...),
        as_email: str = typer.Option(..., "--as"),
        connection_env: str = typer.Option(
            "",
            "--connection-env",
            help="the NAME of an environment variable holding the postgresql:// URL (never on the command "
            "line, where ps and shell history would show it); omitted: keep the stored one",
        ),
        table: str = typer.Option("", "--table"),
        query: str = typer.Option("", "--query"),
        updated_at: str = typer.Option("", "--updated-at", help="a column for incremental syncs"),
        cron: str = typer.Option("", "--cron", help="sync on this schedule (five fields)"),
        timezone: str = typer.Option("UTC", "--timezone"),
    ) -> None:
        """Set dataset NAME's PostgreSQL source (read only)."""
        from backend.records import defined, importing, sync
        from backend.tenancy.context import load_user_context_by_email

        dsn = None
        if connection_env:
            dsn = os.environ.get(connection_env)
            if not dsn:
                fail(f"the environment variable {connection_env} is not set")

        async def go() -> dict[str, Any]:
            ctx = await load_user_context_by_email(as_email)
            importing._require_importer(ctx, name)
            dataset = await defined.get_defined(ctx.company_id, name)
            try:
                return await sync.set_source(
                    dataset,
                    owner_id=ctx.user_id,
                    dsn=dsn,
                    query=query,
                    table=table,
                    updated_at_column=updated_at,
                    cron=cron,
                    timezone=timezone,
                )
            except ValueError as exc:
                fail(str(exc))
                raise

        typer.echo(json.dumps(run_db(go), indent=1, default=str))

    @DATASETS_APP.command("sync")
    def sync_now(
        name: str = typer.Argument(...),
        as_email: str = typer.Option(..., "--as"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Sync dataset NAME from its source now."""
        from backend.records import defined, importing, sync
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> dict[str, Any]:
            ctx = await load_user_context_by_email(as_email)
            importing._require_importer(ctx, name)
            dataset = await defined.get_defined(ctx.company_id, name)
            try:
                return await sync.sync_dataset(dataset, actor=ctx.actor)
            except sync.SyncRefused as exc:
                fail(f"sync failed (the last good data stays): {exc}")
                raise

        _print_report(run_db(go), as_json)
