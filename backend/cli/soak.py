"""`cleanroom soak`: the fault soak (backend/soak/)."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("soak")
    def soak(
        seconds: float = typer.Option(120.0, "--seconds", help="how long the workload and the nemesis run"),
        seed: int = typer.Option(1, "--seed", help="draws the workload's choices and the fault moments"),
        mode: str = typer.Option(
            "embedded",
            "--mode",
            help="embedded (SQLite, `cleanroom serve`) or fleet (PostgreSQL at CLEANROOM_BENCH_POSTGRES_URL, two hosts)",
        ),
        faults: str = typer.Option(
            "",
            "--faults",
            help="comma-separated: kill_api, kill_worker, fill_disk, restart_libvirtd; in a fleet also cut_database, "
            "restart_postgres (default: the mode's faults that stay within the soak's own deployment; "
            "restart_libvirtd kills the machine's libvirtd and runs only when named; restart_postgres only when "
            "named, and only on a cluster that is the soak's own: the README's Fault soak section)",
        ),
        fault_every: float = typer.Option(20.0, "--fault-every", help="mean seconds between faults"),
        settle: float = typer.Option(
            600.0, "--settle", help="seconds every approved run has to end afterwards"
        ),
        keep: bool = typer.Option(False, "--keep", help="keep the deployment's folder for a look afterwards"),
    ) -> None:
        """Run a mixed workload against a real deployment while a nemesis injects faults, then check the
        invariants over the whole history. Prints a JSON summary; exits 1 on any violation."""
        from backend.soak.runner import soak as run_soak

        chosen = [f.strip() for f in faults.split(",") if f.strip()]
        try:
            summary = run_soak(
                seconds,
                seed,
                mode,
                chosen or None,
                fault_every,
                settle,
                keep,
                progress=lambda line: typer.echo(line, err=True),
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        typer.echo(json.dumps(summary, indent=2, default=str))
        raise typer.Exit(0 if summary["ok"] else 1)
