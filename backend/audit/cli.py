from __future__ import annotations

import typer

from backend.audit import service
from backend.cli_support import run_db


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    audit_app = typer.Typer(no_args_is_help=True, help="The hash-chained audit trail.")
    app.add_typer(audit_app, name="audit")

    @audit_app.command("verify")
    def verify() -> None:
        """Check every entry's hash and link; exit 1 naming the first bad entry."""
        result = run_db(service.verify)
        if result.ok:
            typer.echo(f"audit chain OK: {result.checked} entries, head {result.head_hash or '-'}")
            return
        typer.echo(
            f"audit chain BROKEN at entry #{result.first_bad_seq}: {result.reason} "
            f"({result.checked} entries before it are intact)",
            err=True,
        )
        raise typer.Exit(1)
