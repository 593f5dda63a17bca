"""`cleanroom worker --host-id NAME`: a fleet worker on this hypervisor host; `cleanroom workers …`: the
operator's enrollment tokens, the workers' database role and the hosts' state (run on the API's host, with
its DATABASE_URL)."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
from urllib.parse import urlsplit

import typer

from backend.cli.support import fail, group, run_db

PASSWORD_ENV = "CLEANROOM_WORKER_DB_PASSWORD"


def api_url_problem(url: str, insecure: bool) -> str | None:
    """Why a worker must not send its enrollment token to `url`: plain http leaves this host, unless the
    operator says so (`--insecure`). https anywhere, and http to a loopback address, are fine."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--api {url!r}: expected http(s)://host[:port]"
    if parts.scheme == "https" or insecure:
        return None
    host = parts.hostname
    try:
        address = ipaddress.ip_address(host)
        loopback = address.is_loopback or address.is_unspecified  # 0.0.0.0: this host, as serve binds it
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None
    return (
        f"--api {url}: plain http to a non-loopback address would send this host's enrollment token, "
        "its bundles and its results in clear; use https (or pass --insecure on a network you trust)"
    )


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("worker")
    def worker(
        host_id: str = typer.Option("", "--host-id", help="this host's id: letters, digits, underscores"),
        api_url: str = typer.Option(
            None, "--api", help="the API's base URL (default: settings api_base_url)", show_default=False
        ),
        capacity: int = typer.Option(
            None,
            help="VMs at once, within what the host was enrolled for (default: settings max_concurrent_vms)",
        ),
        insecure: bool = typer.Option(
            False, "--insecure", help="allow plain http to a non-loopback --api (the token travels in clear)"
        ),
        full_db_role: bool = typer.Option(
            False,
            "--full-db-role",
            hidden=True,
            help="a worker on the API's own host (serve --with-worker) may use the API's database role",
        ),
        local: bool = typer.Option(
            False, "--local", hidden=True, help="the embedded default's worker (serve)"
        ),
    ) -> None:
        """Take approved runs from the job queue (PostgreSQL) and run each in a fresh VM on this host.
        The enrollment token comes from CLEANROOM_WORKER_TOKEN (see `cleanroom workers enroll`);
        DATABASE_URL is this host's own role (`cleanroom workers db-role HOST_ID`), never the API's."""
        from backend.settings import get_settings, valid_host_id

        if local:  # started and supervised by `cleanroom serve`: the in-process loop, in its own process
            _local_worker()
            return
        token = os.environ.get("CLEANROOM_WORKER_TOKEN", "").strip()
        if not token:
            fail(
                "set CLEANROOM_WORKER_TOKEN to this host's enrollment token (`cleanroom workers enroll HOST`)"
            )
        settings = get_settings()
        api_url = api_url or settings.effective_api_base_url
        if problem := api_url_problem(api_url, insecure):
            fail(problem)
        if not settings.is_postgres:
            fail(
                "a fleet worker needs PostgreSQL: set DATABASE_URL=postgresql://… (the workers' role on the "
                "API's database, `cleanroom workers db-role HOST_ID`)"
            )
        if not valid_host_id(host_id):
            fail("--host-id: 1-32 lower-case letters, digits or underscores")
        if not full_db_role:
            _check_db_role(settings.effective_database_url, host_id)
        # imported after the refusals above: a refused start does not load the host agent (1 CPU-second)
        from backend import observe
        from backend.fleet.host_agent import run_host_agent

        observe.configure_logging()  # JSON lines or text (CLEANROOM_LOG_FORMAT), with each run's request id
        run_host_agent(
            host_id=host_id,
            api_url=api_url,
            token=token,
            capacity=capacity or settings.max_concurrent_vms,
        )

    def _check_db_role(url: str, host_id: str) -> None:
        """A hypervisor host holds no credential that reads or changes the product's tables, another host's
        jobs, or the database's disk (temporary tables): its own role, `cleanroom workers db-role HOST`."""
        import psycopg

        from backend.fleet.jobs import product_tables_reachable, worker_role_problems

        try:
            reachable = product_tables_reachable(url)
            problems, others = worker_role_problems(url, host_id)
        except psycopg.Error as exc:
            fail(f"the job queue's database is not reachable with DATABASE_URL: {exc}")
        if reachable:
            shown = ", ".join(reachable[:6]) + (" …" if len(reachable) > 6 else "")
            fail(
                f"DATABASE_URL's role may read or change the product's tables ({shown}); a worker host gets "
                f"its own role only: on the API's host run `cleanroom workers db-role {host_id}` and use its URL"
            )
        if problems:
            fail(
                f"DATABASE_URL's role is not host {host_id}'s own: {'; '.join(problems)}. On the API's host "
                f"run `cleanroom workers db-role {host_id}` and use its URL"
            )
        if others:
            logging.getLogger("cleanroom.fleet.host").warning(
                "this host's role may still connect to the cluster's databases %s: their owner should "
                "REVOKE CONNECT, TEMPORARY ON DATABASE … FROM PUBLIC",
                ", ".join(others),
            )

    def _local_worker() -> None:
        import asyncio

        from backend import db, observe
        from backend.execution.process import serve_local

        observe.configure_logging()  # JSON lines or text (CLEANROOM_LOG_FORMAT), with each run's request id
        db.configure()
        asyncio.run(serve_local())

    workers = group("Fleet workers: enrollment tokens and hosts (operators, on the API's host).")
    app.add_typer(workers, name="workers")

    @workers.command("enroll")
    def enroll(
        host_id: str = typer.Argument(..., help="the host id the token is for"),
        capacity: int = typer.Option(
            None,
            help="the most VMs at once the host is offered runs for (default: settings max_concurrent_vms)",
        ),
    ) -> None:
        """A new enrollment token for HOST_ID, printed once (only its hash is kept). The host's capacity is
        set here: what it says when it registers is capped by it."""
        from backend.errors import AppError
        from backend.fleet import service

        try:
            token = run_db(
                lambda: service.enroll(
                    host_id, created_by=f"cli:{os.environ.get('USER', 'root')}", capacity=capacity
                )
            )
        except AppError as exc:
            fail(str(exc.detail))
        typer.echo(token)

    @workers.command("db-role")
    def db_role(
        host_id: str = typer.Argument(..., help="the host the role is for (its --host-id)"),
        role: str = typer.Argument("", help="the role's name (default cleanroom_worker_HOST_ID)"),
        leave_other_databases: bool = typer.Option(
            False,
            "--leave-other-databases",
            help="keep PUBLIC's CONNECT on the cluster's other databases (a cluster shared with other "
            "applications that rely on it); the role may then connect to them",
        ),
    ) -> None:
        """Create (or reset) host HOST_ID's PostgreSQL role on the API's database: it may use procrastinate's
        tables, sequences and functions, its rows limited to HOST_ID's queue by row-level security, and
        nothing of the product's. PUBLIC loses TEMP on this database and CONNECT and TEMP on the cluster's
        other databases. The password comes from CLEANROOM_WORKER_DB_PASSWORD, else it is asked for; run it
        again after an upgrade. One role per host: a host holds no credential for another's jobs."""
        from backend.fleet.jobs import product_tables_reachable
        from backend.fleet.queue import make_worker_role, role_url, worker_role_of
        from backend.settings import get_settings, valid_host_id

        settings = get_settings()
        if not settings.is_postgres:
            fail("the workers' role is for a fleet: set DATABASE_URL=postgresql://… (the API's database)")
        if not valid_host_id(host_id):
            fail("HOST_ID: 1-32 lower-case letters, digits or underscores")
        role = role or worker_role_of(host_id)
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", role):
            fail("the role: lower-case letters, digits and underscores, at most 63")
        password = os.environ.get(PASSWORD_ENV) or typer.prompt(
            f"password for {role}", hide_input=True, confirmation_prompt=True
        )
        if len(password) < 16:
            fail("the workers' role password: at least 16 characters")
        url = settings.effective_database_url
        try:  # the database's migrations first: the API's lock rows
            made = run_db(
                lambda: make_worker_role(
                    url, host_id, password, role=role, other_databases=[] if leave_other_databases else None
                )
            )
        except Exception as exc:
            fail(f"could not make the workers' role: {exc}")
        worker_url = role_url(url, role, password)
        reachable = product_tables_reachable(worker_url)
        if reachable:  # a grant to PUBLIC, or default privileges: the role is not what it must be
            fail(f"the role {role} can still reach the product's tables: {', '.join(reachable)}")
        typer.echo(
            f"role {role}: procrastinate only, host {host_id}'s queue only "
            f"({len(made.granted)} tables, sequences and functions)"
        )
        if made.connect_revoked:
            typer.echo(f"PUBLIC may no longer connect to: {', '.join(made.connect_revoked)}")
        if made.connect_left:
            typer.echo(
                f"warning: {role} may still connect to {', '.join(made.connect_left)} (as their owner: "
                "REVOKE CONNECT, TEMPORARY ON DATABASE … FROM PUBLIC)",
                err=True,
            )
        if not made.can_cut_off:
            typer.echo(
                f"warning: the API's role is not a member of {role}, so it cannot end a session of this host "
                f"that blocks the job queue; as a superuser: GRANT {role} TO <the API's role>",
                err=True,
            )
        shown = role_url(url, role, "PASSWORD")
        typer.echo(f"give host {host_id} DATABASE_URL={shown} (PASSWORD: the one just set, URL-encoded)")

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
