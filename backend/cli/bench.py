"""The bench group's own behaviour (with no sub-command it runs every registered suite), and suites that
belong to no capability CLI of their own."""

from __future__ import annotations

import typer

from backend import benches


def _scanner_suite() -> dict:
    from backend.benches.scanner import bench_scan

    return bench_scan()


def _scan_cache_suite() -> dict:
    from backend.benches.scan_cache import bench_scan_cache

    return bench_scan_cache()


def _injection_suite() -> dict:
    from backend.injection_training.evaluate import run, summary

    return summary(run())


def _convert_suite() -> dict:
    from backend.benches.convert import bench_convert
    from backend.demo.files import conversion_samples

    return bench_convert(conversion_samples())


def _service_suite() -> dict:
    from backend.benches.service import run_service_bench

    return run_service_bench()


def _flow_suite() -> dict:
    from backend.benches.flows import run_flow_bench

    return run_flow_bench()


def _workers_suite() -> dict:
    from backend.benches.workers import run_workers_bench

    return run_workers_bench()


def _control_plane_suite() -> dict:
    from backend.benches.control_plane import run_control_plane_bench

    return run_control_plane_bench()


def _audit_suite() -> dict:
    from backend.benches.audit import bench_audit

    return bench_audit()


def _datasets_suite() -> dict:
    from backend.benches.datasets import bench_datasets

    return bench_datasets()


def _notify_suite() -> dict:
    from backend.benches.notify import bench_notify

    return bench_notify()


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @bench_app.callback(invoke_without_command=True)
    def bench_all(ctx: typer.Context, json_out: bool = typer.Option(False, "--json")) -> None:
        """Run every benchmark suite (or one: `cleanroom bench NAME`)."""
        if ctx.invoked_subcommand is None:
            benches.run_suites(sorted(benches.SUITES), json_out)

    benches.add_suite(
        bench_app, "scanner", _scanner_suite, "Injection scanner throughput (cells per second)."
    )
    benches.add_suite(
        bench_app,
        "scan-cache",
        _scan_cache_suite,
        "A proposal's injection scan (3 datasets x 5,000 rows + 20 text files) with the verdict cache: "
        "p50 cold, with every cell cached, and without the cache; the hit rate.",
    )
    benches.add_suite(
        bench_app,
        "injection",
        _injection_suite,
        "Injection scanner recall and false positives on public corpora (python -m backend.injection_training.evaluate).",
    )
    benches.add_suite(
        bench_app,
        "convert",
        _convert_suite,
        "Drive file conversion per file type: in the bubblewrap sandbox, without it, in-process (p50, overhead).",
    )
    benches.add_suite(
        bench_app,
        "service",
        _service_suite,
        "The run loop through the API, with and without standby guests: approve → user code, approve → "
        "succeeded (trivial, pandas chart), eight approved at once; ratios to bare host python.",
    )
    benches.add_suite(
        bench_app,
        "flow",
        _flow_suite,
        "Flows through the API: per-step overhead (step k's VM ready → step k+1's VM ready) for five trivial "
        "steps, the hand-over alone, approve → flow succeeded; with and without standby guests.",
    )
    benches.add_suite(
        bench_app,
        "workers",
        _workers_suite,
        "The fleet on PostgreSQL: 16 trivial runs by one worker and by two (ratio), and approve → user code "
        "through procrastinate against the in-process queue (CLEANROOM_BENCH_POSTGRES_URL).",
    )
    benches.add_suite(
        bench_app,
        "control-plane",
        _control_plane_suite,
        "One API process (fleet mode, PostgreSQL) under simulated assistants (HTTP and MCP) and simulated "
        "hosts, no VM: p50/p95/p99 per route, dispatch rate, the API's RSS, CPU, descriptors and database "
        "connections (CLEANROOM_BENCH_CP_ASSISTANTS, _HOSTS, _SECONDS, _MCP_SHARE, _POLL_SHARE, _RAMP_SECONDS, _STAGE, _PROCESSES; CLEANROOM_BENCH_POSTGRES_URL).",
    )
    benches.add_suite(
        bench_app,
        "audit",
        _audit_suite,
        "Audit entries appended per second by 50 concurrent callers, recorded together and committed "
        "together against one commit per entry (ratio), the chain verified after each; SQLite, or "
        "PostgreSQL with CLEANROOM_BENCH_POSTGRES_URL.",
    )
    benches.add_suite(
        bench_app,
        "datasets",
        _datasets_suite,
        "The 5,000-row export (and a 50-row records page) of a company-defined dataset of 1,000,000 rows for a "
        "member who sees 10 %, against a built-in table of the same rows; PostgreSQL (CLEANROOM_BENCH_POSTGRES_URL, "
        "CLEANROOM_BENCH_DATASET_ROWS, CLEANROOM_BENCH_DATASET_RUNS).",
    )
    benches.add_suite(
        bench_app,
        "notify",
        _notify_suite,
        "Proposal → approval request in both approvers' inboxes and at the company's webhook (p50, max; the goal "
        "is 5 s): the API in-process on SQLite, an SMTP server and an HTTP receiver on loopback.",
    )
