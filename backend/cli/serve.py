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
        with_worker: bool = typer.Option(
            False,
            "--with-worker",
            help="in a fleet (CLEANROOM_WORKERS=fleet): also start a worker on this host",
        ),
    ) -> None:
        """Serve the API, worker and console with the embedded defaults; prints the URLs. In a fleet
        (CLEANROOM_WORKERS=fleet, PostgreSQL) runs go to `cleanroom worker` processes instead."""
        import uvicorn

        from backend import filemodes
        from backend.app import create_app
        from backend.settings import get_settings

        settings = get_settings()
        filemodes.ensure_dirs(settings.data_dir)
        console_proc = worker_proc = local = None
        if with_worker:
            worker_proc = _local_worker(settings)
        if settings.workers == "in_process":  # the embedded default: a worker process of its own, supervised
            from backend.runs import queued
            from backend.worker.process import LocalWorker

            local = LocalWorker()
            local.start()
            queued.listen(local.poke)
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
            app = create_app(worker_here=local is None)
            uvicorn.run(app, host=settings.host, port=settings.api_port, log_level="info")
        finally:
            if local is not None:
                local.stop()  # it takes nothing new and exits once its running VMs finished
            for proc in (console_proc, worker_proc):
                if proc:
                    proc.terminate()  # a worker drains: its running VMs finish first
            if console_proc:
                console_proc.wait(timeout=10)
            if worker_proc:
                worker_proc.wait()


def _local_worker(settings) -> subprocess.Popen:
    """`cleanroom worker --host-id local` beside the API, enrolled with a fresh token (a single-host fleet)."""
    from backend.cli.support import fail, run_db
    from backend.fleet import service

    if settings.workers != "fleet" or not settings.is_postgres:
        fail("--with-worker is for a fleet: set CLEANROOM_WORKERS=fleet and DATABASE_URL=postgresql://…")
    token = run_db(lambda: service.enroll("local", created_by="cleanroom serve --with-worker"))
    env = dict(
        os.environ, CLEANROOM_WORKER_TOKEN=token, CLEANROOM_API_BASE_URL=settings.effective_api_base_url
    )
    # on the API's own host, which holds the API's database role anyway (a hypervisor host never does)
    command = ["worker", "--host-id", "local", "--full-db-role"]
    return subprocess.Popen([sys.executable, "-m", "backend", *command], env=env)
