"""`cleanroom health`: the whole host's view (every company's queue, the image path, libvirt's errors).
Operators run it on the host; the HTTP API shows a company only its own runs."""

from __future__ import annotations

import json

import typer

from backend.cli.support import run_db


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("health")
    def health(json_out: bool = typer.Option(False, "--json", help="one JSON object")) -> None:
        """The VM runner, the file converters and the queue across all companies; exit 1 when the runner reports
        a problem or file conversion is refused."""
        from backend.system_controller import operator_health

        info = run_db(operator_health)
        # file conversion refused (no bwrap, or the converter user cannot run confined): Drive files stage nothing
        refused = "; ".join(info.get("converter_fallback") or [])
        problem = info.get("error") or info.get("libvirt_error") or refused
        if json_out:
            typer.echo(json.dumps(info, indent=2, sort_keys=True, default=str))
        else:
            for key in ("virt_type", "image_hash", "queue_length", "running_runs", "running_vms"):
                typer.echo(f"{key:<20}{info.get(key)}")
            typer.echo(f"{'image':<20}{(info.get('image') or {}).get('path')}")
            typer.echo(f"{'max_concurrent_vms':<20}{info.get('max_concurrent_vms')}")
            typer.echo(f"{'database':<20}{info.get('database')}")
            guest = info.get("guest") or {}
            if guest:
                from backend.sandbox.guest_python import offered_summary

                typer.echo(f"{'guest python':<20}{guest['python']} ({guest['source']})")
                typer.echo(f"{'guest packages':<20}{offered_summary(guest)}")
                if guest.get("extras_current") is False:
                    typer.echo(f"{'':<20}the extras changed: this image serves until `cleanroom image build`")
            typer.echo(f"{'converters':<20}{refused or 'confined (bubblewrap, converter user, seccomp)'}")
            if problem:
                typer.echo(f"problem: {problem}", err=True)
        if problem:
            raise typer.Exit(1)
