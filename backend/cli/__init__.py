"""The `cleanroom` command. Each module here contributes its commands through `register(app, bench_app)`;
this is the one list of them, in help order."""

from __future__ import annotations

import typer

from backend.cli import audit, bench, demo, drive, health, records, sandbox, serve, staging
from backend.mcp import cli as mcp

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Cleanroom: approved code on private data."
)
bench_app = typer.Typer(no_args_is_help=False, help="Benchmarks (medians; --json for machines).")
app.add_typer(bench_app, name="bench")

for _module in (bench, serve, health, demo, records, audit, drive, staging, sandbox, mcp):
    _module.register(app, bench_app)


def main() -> None:
    app()
