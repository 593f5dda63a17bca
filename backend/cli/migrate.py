from __future__ import annotations

import typer

from backend.cli.support import require_database, run_db

EXIT_PENDING = 3  # `migrate --check`: migrations wait (0: at head; 1: an error, such as no database)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("migrate")
    def migrate(
        check: bool = typer.Option(
            False,
            "--check",
            help=f"change nothing: list the migrations that have not run and exit {EXIT_PENDING} if any do, 0 at head",
        ),
    ) -> None:
        """Bring the database to this version's schema (the Piccolo migrations in backend/migrations), under
        the migration lock: another `migrate`, or a service starting meanwhile, waits and then finds nothing
        to do. Every start of the service migrates the same way; a deploy script runs this first (and
        `--check` to ask). Back up first (docs/operating.md)."""
        from backend import db
        from backend.version import VERSION

        if check:
            require_database()
            pending = run_db(db.pending_migrations, create=False)
            if pending:
                typer.echo(
                    f"{len(pending)} migration(s) to run for cleanroom {VERSION}: {pending[0]} to {pending[-1]}"
                )
                raise typer.Exit(EXIT_PENDING)
            typer.echo(f"the database is at cleanroom {VERSION}'s schema: nothing to migrate")
            return
        applied = run_db(db.migrate, create=False)
        if applied:
            typer.echo(
                f"migrated to cleanroom {VERSION}'s schema: ran {len(applied)} migration(s), {applied[0]} to {applied[-1]}"
            )
        else:
            typer.echo(f"the database is at cleanroom {VERSION}'s schema: nothing to migrate")
