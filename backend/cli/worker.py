"""`cleanroom worker --host-id NAME`: a fleet worker on this hypervisor host; `cleanroom workers …`: the
operator's enrollment tokens and the hosts' state (run on the API's host, with its DATABASE_URL)."""

from __future__ import annotations

import json
import logging
import os

import typer

from backend.cli.support import fail, group, run_db


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("worker")
    def worker(
        host_id: str = typer.Option("", "--host-id", help="this host's id: letters, digits, underscores"),
        api_url: str = typer.Option(
            None, "--api", help="the API's base URL (default: settings api_base_url)", show_default=False
        ),
        capacity: int = typer.Option(None, help="VMs at once (default: settings max_concurrent_vms)"),
        local: bool = typer.Option(
            False, "--local", hidden=True, help="the embedded default's worker (serve)"
        ),
    ) -> None:
        """Take approved runs from the job queue (PostgreSQL) and run each in a fresh VM on this host.
        The enrollment token comes from CLEANROOM_WORKER_TOKEN (see `cleanroom workers enroll`)."""
        from backend.settings import get_settings, valid_host_id

        if local:  # started and supervised by `cleanroom serve`: the in-process loop, in its own process
            _local_worker()
            return
        from backend.fleet.worker import run_worker

        token = os.environ.get("CLEANROOM_WORKER_TOKEN", "").strip()
        if not token:
            fail(
                "set CLEANROOM_WORKER_TOKEN to this host's enrollment token (`cleanroom workers enroll HOST`)"
            )
        settings = get_settings()
        if not settings.is_postgres:
            fail("a fleet worker needs PostgreSQL: set DATABASE_URL=postgresql://… (the API's database)")
        if not valid_host_id(host_id):
            fail("--host-id: 1-32 lower-case letters, digits or underscores")
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        run_worker(
            host_id=host_id,
            api_url=api_url or settings.effective_api_base_url,
            token=token,
            capacity=capacity or settings.max_concurrent_vms,
        )

    def _local_worker() -> None:
        import asyncio

        from backend import db
        from backend.worker.process import serve_local

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        db.configure()
        asyncio.run(serve_local())

    workers = group("Fleet workers: enrollment tokens and hosts (operators, on the API's host).")
    app.add_typer(workers, name="workers")

    @workers.command("enroll")
    def enroll(host_id: str = typer.Argument(..., help="the host id the token is for")) -> None:
        """A new enrollment token for HOST_ID, printed once (only its hash is kept)."""
        from backend.errors import AppError
        from backend.fleet import service

        try:
            token = run_db(
                lambda: service.enroll(host_id, created_by=f"cli:{os.environ.get('USER', 'root')}")
            )
        except AppError as exc:
            fail(str(exc.detail))
        typer.echo(token)

    @workers.command("revoke")
    def revoke(token_id: int = typer.Argument(..., help="the token's id (`cleanroom workers list`)")) -> None:
        """Revoke a worker token: its host can no longer claim, fetch or report anything."""
        from backend.errors import AppError
        from backend.fleet import service

        try:
            row = run_db(lambda: service.revoke(token_id, actor=f"cli:{os.environ.get('USER', 'root')}"))
        except AppError as exc:
            fail(str(exc.detail))
        typer.echo(f"revoked token {token_id} ({row['prefix']}…) of host {row['host_id']}")

    @workers.command("list")
    def list_(json_out: bool = typer.Option(False, "--json", help="one JSON object")) -> None:
        """Each host (capacity, running, heartbeat age, up) and each token (prefix, revoked)."""
        from backend.fleet import service

        async def both() -> dict:
            return {"hosts": await service.hosts(), "tokens": await service.tokens()}

        info = run_db(both)
        if json_out:
            typer.echo(json.dumps(info, indent=2, sort_keys=True, default=str))
            return
        for h in info["hosts"]:
            state = "up" if h["up"] else "lost"
            typer.echo(
                f"host {h['host_id']:<16} {state:<5} capacity {h['capacity']} running {h['running']} "
                f"heartbeat {h['heartbeat_age_seconds']}s ago{' draining' if h['draining'] else ''}"
            )
        for t in info["tokens"]:
            typer.echo(
                f"token {t['id']:<4} {t['prefix']}…  host {t['host_id']:<16}{' revoked' if t['revoked'] else ''}"
            )
