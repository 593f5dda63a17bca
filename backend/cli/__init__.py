"""The `cleanroom` command. Each module here contributes its commands through `register(app, bench_app)`;
this is the one list of them, in help order."""

from __future__ import annotations

import typer

from backend.cli import (
    audit,
    backup,
    bench,
    companies,
    credits,
    datasets,
    demo,
    drive,
    health,
    imports,
    mcp,
    migrate,
    records,
    sandbox,
    serve,
    soak,
    staging,
    worker,
)
from backend.cli.support import group

app = group("Cleanroom: approved code on private data.", add_completion=False)
bench_app = group("Benchmarks (medians; --json for machines).", no_args_is_help=False)
app.add_typer(bench_app, name="bench")


def _print_version(value: bool) -> None:
    if value:
        from backend.version import VERSION

        typer.echo(f"cleanroom {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """Cleanroom: approved code on private data."""


for _module in (
    bench,
    serve,
    migrate,
    worker,
    health,
    demo,
    companies,
    records,
    datasets,
    imports,
    audit,
    backup,
    credits,
    drive,
    staging,
    sandbox,
    soak,
    mcp,
):
    _module.register(app, bench_app)


def main() -> None:
    app()
