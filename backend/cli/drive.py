from __future__ import annotations

from pathlib import Path

import typer

from backend.cli.support import fail, group, run_db


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    drive_app = group("The company Drive.")
    app.add_typer(drive_app, name="drive")

    @drive_app.command("put")
    def put(
        files: list[Path] = typer.Argument(..., exists=True, dir_okay=False, readable=True),
        as_email: str = typer.Option(..., "--as"),
        folder_id: int | None = typer.Option(None, "--folder-id"),
        visibility: str = typer.Option("private", help="private, team or company"),
    ) -> None:
        """Upload files; prints each new file id."""
        from backend.drive import service
        from backend.settings import get_settings
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> list[dict]:
            ctx = await load_user_context_by_email(as_email)
            return [
                await service.upload(ctx, f.name, f.read_bytes(), folder_id=folder_id, visibility=visibility)
                for f in files
            ]

        limit = get_settings().max_upload_bytes
        for f in files:
            if f.stat().st_size > limit:
                fail(f"{f} is {f.stat().st_size:,} bytes; the limit per file is {limit:,} bytes")
        for row in run_db(go):
            typer.echo(f"{row['id']}\t{row['kind']}\t{row['size']}\t{row['name']}")

    @drive_app.command("ls")
    def ls(as_email: str = typer.Option(..., "--as")) -> None:
        """List every Drive file this user can see."""
        from backend.drive import service
        from backend.tenancy.context import load_user_context_by_email

        async def go() -> list[dict]:
            ctx = await load_user_context_by_email(as_email)
            return await service.list_files(ctx, all_folders=True)

        for row in run_db(go):
            typer.echo(f"{row['id']}\t{row['kind']}\t{row['size']}\t{row['visibility']}\t{row['name']}")

    @drive_app.command("purge-trash")
    def purge_trash() -> None:
        """Purge every company's Drive files that have been in the trash for 30 days (for a daily timer;
        the API also purges a company's on its next upload, quota read or trash listing)."""
        from backend.drive import service

        typer.echo(f"purged {run_db(service.purge_expired)} files")
