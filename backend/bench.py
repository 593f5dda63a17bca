"""Benchmark registry: `cleanroom bench` runs every registered suite, `cleanroom bench NAME` runs one.

A suite is a function taking no arguments and returning a JSON-able dict of figures
(medians/p95 in milliseconds, with the sample count). Capabilities call `add_suite` from their CLI `register` hook.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from typing import Any

import typer

SUITES: dict[str, Callable[[], dict[str, Any]]] = {}


def add_suite(bench_app: typer.Typer, name: str, fn: Callable[[], dict[str, Any]], help: str) -> None:
    """Register a suite: it runs under `cleanroom bench` and alone as `cleanroom bench NAME`."""
    SUITES[name] = fn

    @bench_app.command(name, help=help)
    def _run_one(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
        run_suites([name], json_out)


def summarize(samples_ms: list[float]) -> dict[str, float | int]:
    ordered = sorted(samples_ms)
    p95_index = max(0, min(len(ordered) - 1, round(0.95 * (len(ordered) - 1))))
    return {
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[p95_index], 1),
        "min": round(ordered[0], 1),
        "n": len(ordered),
    }


def _print(name: str, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        return
    typer.echo(f"== {name}")
    for key, value in result.items():
        typer.echo(f"  {key}: {json.dumps(value)}")


def run_suites(names: list[str], as_json: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        if not as_json:
            typer.echo(f"running {name} …", err=True)
        results[name] = SUITES[name]()
        _print(name, results[name], as_json)
    if as_json:
        typer.echo(json.dumps(results, indent=2))
    return results
