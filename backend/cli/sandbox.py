"""`cleanroom image build`, `cleanroom image lock`, `cleanroom sandbox exec`, `cleanroom selftest isolation`, `cleanroom bench sandbox`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from backend.benches import add_suite
from backend.cli.support import group

sandbox_app = group("Run code in a fresh VM (host-admin tool).")
image_app = group("The guest image.")
selftest_app = group("Self-tests that prove the product's claims.")


@image_app.command("build")
def image_build(
    force: bool = typer.Option(False, "--force", help="Rebuild even if the recipe did not change."),
    no_saved_state: bool = typer.Option(False, "--no-saved-state", help="Skip making the warm saved states."),
) -> None:
    """Build the guest image into the cache (only when the recipe changed) and its warm saved states."""
    from backend.sandbox import ensure_image, prepare_saved_states
    from backend.sandbox.guest_python import GuestPackagesRefused

    try:
        info = ensure_image(force=force, progress=lambda msg: typer.echo(msg, err=True))
    except GuestPackagesRefused as exc:  # the check step: nothing was replaced
        typer.echo(str(exc), err=True)
        typer.echo("nothing was built: the image built before (if any) keeps serving", err=True)
        raise typer.Exit(1) from None
    if not no_saved_state:
        prepare_saved_states(progress=lambda msg: typer.echo(msg, err=True), force=force)
    typer.echo(f"path: {info.directory}")
    typer.echo(f"image hash: {info.image_hash}")


@image_app.command("lock")
def image_lock() -> None:
    """Re-resolve vm_templates/image/python.in into python.lock: the newest versions with wheels for the guest
    (CPython 3.11, manylinux x86_64), each pinned to its wheel's sha256 (a maintainer's step, with uv and PyPI)."""
    from backend.sandbox.guest_python import resolve_lock

    resolve_lock(progress=lambda msg: typer.echo(msg, err=True))


@sandbox_app.command("exec")
def sandbox_exec(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True),
    input_dir: Path | None = typer.Option(None, "--input", exists=True, file_okay=False),
    out: Path = typer.Option(Path("cleanroom-out"), "--out", help="Where accepted output files go."),
    time_limit: int = typer.Option(120, "--time-limit", help="Wall-clock seconds (capped by the operator)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run FILE in a fresh VM outside any approval flow. Exit code 0 only when the run succeeded."""
    from backend.sandbox import RunLimits, run_code

    result = run_code(
        file.read_text(), input_dir=input_dir, out_dir=out, limits=RunLimits(wall_seconds=time_limit)
    )
    if json_out:
        typer.echo(result.model_dump_json(indent=2))
    else:
        typer.echo(result.stdout, nl=False)
        if result.stderr:
            typer.echo(result.stderr, err=True, nl=False)
        t = result.timings_ms
        typer.echo(
            f"\n[{result.status}] exit={result.exit_code} vm={result.vm.virt_type} nics={result.vm.nics} "
            f"restored={result.vm.restored} start={t.start:.0f}ms total={t.total:.0f}ms",
            err=True,
        )
        for f in result.files:
            typer.echo(f"  file {out / f.name} ({f.size} bytes, sha256 {f.sha256[:12]}…)", err=True)
        for r in result.rejected_files:
            typer.echo(f"  rejected {r.name!r}: {r.reason}", err=True)
        if result.error:
            typer.echo(f"  error: {result.error}", err=True)
    raise typer.Exit(0 if result.status == "succeeded" else 1)


@sandbox_app.command("daemons")
def sandbox_daemons() -> None:
    """Start virtlogd and libvirtd (hosts without systemd) under a supervisor that reaps QEMU at once."""
    from backend.sandbox.daemons import start_daemons

    typer.echo(start_daemons())


@selftest_app.command("isolation")
def selftest_isolation(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Network probe in a no-NIC VM, and in a VM with a user-mode NIC (positive control)."""
    from backend.sandbox.selftest import run_isolation_selftest

    report = run_isolation_selftest()
    if json_out:
        typer.echo(json.dumps(report, indent=2))
    else:
        for key, title in (
            ("no_nic", "(a) normal run VM, no NIC"),
            ("positive_control", "(b) same image + user-mode NIC"),
        ):
            half = report[key]
            typer.echo(f"{title}: {'PASS' if half['passed'] else 'FAIL'}  — expect {half['expectation']}")
            typer.echo(
                f"    run: {half['run_status']} vm: virt={half['vm']['virt_type']} libvirt nics={half['vm']['nics']}"
            )
            probe = half["probe"]
            typer.echo(f"    interfaces: {probe.get('interfaces')}")
            for check in ("tcp_host_listener", "udp_host_listener", "tcp_internet", "dns"):
                r = probe.get(check, {})
                shown = (
                    "ok: " + str(r.get("detail")) if r.get("ok") else f"{r.get('errno')} {r.get('detail')}"
                )
                typer.echo(f"    {check}: {shown}")
            typer.echo(f"    host listener received: {half['host_listener_received']}")
            if half["run_error"]:
                typer.echo(f"    error: {half['run_error']}")
        typer.echo("isolation self-test " + ("PASSED" if report["passed"] else "FAILED"))
    raise typer.Exit(0 if report["passed"] else 1)


def _bench() -> dict:
    from backend.benches.sandbox import run_sandbox_bench

    return run_sandbox_bench()


def _hangs() -> dict:
    from backend.benches.hangs import run_hang_bench
    from backend.benches.workers import hang_figures

    return run_hang_bench(fleet_figures=hang_figures)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")
    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(selftest_app, name="selftest")
    add_suite(
        bench_app,
        "sandbox",
        _bench,
        "VM start and run times: vm_ready, trivial, pandas chart, cold boot, four concurrent.",
    )
    add_suite(
        bench_app,
        "hangs",
        _hangs,
        "Hundreds of trivial runs per start path (restore, standby; cold on request), two at once: how many "
        "guests go silent after READY, with each one's evidence (CLEANROOM_BENCH_HANG_RUNS, _PARALLEL, _PATHS).",
    )
