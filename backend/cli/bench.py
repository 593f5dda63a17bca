"""The bench group's own behaviour (with no sub-command it runs every registered suite), and suites that
belong to no capability CLI of their own."""

from __future__ import annotations

import typer

from backend import bench


def _scanner_suite() -> dict:
    from backend.injection.bench import bench_scan

    return bench_scan()


def _injection_suite() -> dict:
    from backend.injection.harness.evaluate import run, summary

    return summary(run())


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.callback(invoke_without_command=True)
    def bench_all(ctx: typer.Context, json_out: bool = typer.Option(False, "--json")) -> None:
        """Run every benchmark suite (or one: `cleanroom bench NAME`)."""
        if ctx.invoked_subcommand is None:
            bench.run_suites(sorted(bench.SUITES), json_out)

    bench.add_suite(bench_app, "scanner", _scanner_suite, "Injection scanner throughput (cells per second).")
    bench.add_suite(
        bench_app,
        "injection",
        _injection_suite,
        "Injection scanner recall and false positives on public corpora (python -m backend.injection.evaluate).",
    )
