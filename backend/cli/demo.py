from __future__ import annotations

import typer

from backend.cli.support import group, run_db


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    demo_app = group("The demo companies.")
    app.add_typer(demo_app, name="demo")

    @demo_app.command("seed")
    def seed(reset: bool = typer.Option(False, "--reset", help="drop all data first")) -> None:
        """Create Acme Analytics and Globex with users, records and Drive files."""
        from backend.demo import seed as demo_seed

        summary = run_db(lambda: demo_seed.seed(reset=reset))
        if not summary["seeded"]:
            typer.echo(f"demo seed skipped: {summary['reason']}")
            return
        typer.echo("demo companies created: Acme Analytics, Globex")
        typer.echo(f"users (password '{summary['password']}'): " + ", ".join(summary["users"]))
        typer.echo(f"Acme tasks: {summary['tasks']}")
