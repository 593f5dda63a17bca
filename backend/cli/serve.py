"""`cleanroom serve`: the API (with its in-process worker) and the console, on localhost."""

from __future__ import annotations

import os
import subprocess
import sys

import typer


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        console: bool = typer.Option(True, help="also start the console process"),
    ) -> None:
        """Serve the API, worker and console with the embedded defaults; prints the URLs."""
        import uvicorn

        from backend.app import create_app
        from backend.settings import get_settings

        settings = get_settings()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        console_proc = None
        if console:
            env = dict(os.environ, CLEANROOM_API_BASE_URL=settings.effective_api_base_url)
            console_proc = subprocess.Popen([sys.executable, "-m", "console"], env=env)
        typer.echo(
            f"Cleanroom API      http://{settings.host}:{settings.api_port}  (OpenAPI: /schema/openapi.json)"
        )
        if console:
            typer.echo(f"Cleanroom console  http://{settings.host}:{settings.console_port}")
        typer.echo(f"database           {settings.effective_database_url}")
        try:
            uvicorn.run(create_app(), host=settings.host, port=settings.api_port, log_level="info")
        finally:
            if console_proc:
                console_proc.terminate()
                console_proc.wait(timeout=10)
