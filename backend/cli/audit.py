from __future__ import annotations

from pathlib import Path

import typer

from backend.cli.support import group, run_db


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    audit_app = group("The hash-chained audit trail.")
    app.add_typer(audit_app, name="audit")

    @audit_app.command("verify")
    def verify() -> None:
        """Check every entry's hash and link, and the table against the head anchored in the data
        directory (deleting the newest entries is noticed); exit 1 naming the first bad entry."""
        from backend.audit import anchor, service

        async def check() -> tuple[service.VerifyResult, str]:
            return await service.verify(), str(anchor.path())

        result, anchor_file = run_db(check)
        if result.ok:
            typer.echo(f"audit chain OK: {result.checked} entries, head {result.head_hash or '-'}")
            typer.echo(f"anchor: {anchor_file}" + ("" if Path(anchor_file).exists() else " (none yet)"))
            return
        typer.echo(
            f"audit chain BROKEN at entry #{result.first_bad_seq}: {result.reason} "
            f"({result.checked} entries before it are intact)",
            err=True,
        )
        raise typer.Exit(1)
