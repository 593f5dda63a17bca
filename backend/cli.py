"""The `cleanroom` command. Each capability contributes its commands through a `register(app, bench)` hook."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Cleanroom: approved code on private data."
)
bench_app = typer.Typer(no_args_is_help=False, help="Benchmarks (medians; --json for machines).")
app.add_typer(bench_app, name="bench")

# Modules exposing `register(app: typer.Typer, bench: typer.Typer) -> None`, in help order.
CLI_MODULES = [
    "backend.cli_core",
    "backend.serve",
    "backend.system_cli",
    "backend.demo.cli",
    "backend.records.cli",
    "backend.audit.cli",
    "backend.drive.cli",
    "backend.staging.cli",
    "backend.sandbox.cli",
    "backend.mcp.cli",
]


def _load() -> None:
    for name in CLI_MODULES:
        importlib.import_module(name).register(app, bench_app)


def main() -> None:
    _load()
    app()
