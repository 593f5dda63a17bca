"""`cleanroom serve`: the API (with its in-process worker) and the console, on localhost."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import typer

PRIVATE_UMASK = 0o077
KEEP_ALIVE_SECONDS = 20  # how long the API keeps an idle connection open (uvicorn: 5)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        console: bool = typer.Option(True, help="also start the console process"),
        with_worker: bool = typer.Option(
            False,
            "--with-worker",
            help="in a fleet (CLEANROOM_WORKERS=fleet): also start a worker on this host",
        ),
        processes: int = typer.Option(
            1,
            "--processes",
            min=1,
            max=64,
            help="API processes on the one port (PostgreSQL only); what must happen once still does",
        ),
        new_anchor: bool = typer.Option(
            False,
            "--new-anchor",
            envvar="CLEANROOM_NEW_ANCHOR",
            help="start a new audit anchor for a database that has none kept (moved, or a new database where "
            "the data directory keeps another's); without it `serve` refuses",
        ),
    ) -> None:
        """Serve the API, worker and console with the embedded defaults; prints the URLs. In a fleet
        (CLEANROOM_WORKERS=fleet, PostgreSQL) runs go to `cleanroom worker` processes instead."""
        import uvicorn

        from backend.settings import get_settings

        settings = get_settings()
        _shared_metrics_folder(settings)  # before prometheus_client is imported, here and in every child

        from backend import filemodes, observe
        from backend.app import SERVE_WORKER_HERE, create_app

        observe.configure_logging()
        if processes > 1 and not settings.is_postgres:
            typer.secho(
                "--processes above 1 needs PostgreSQL (DATABASE_URL=postgresql://…): SQLite takes one writer "
                "at a time, so more API processes would only wait on each other",
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(2)
        filemodes.ensure_dirs(settings.data_dir)
        private_umask(settings)
        _forwarding_checks(settings)
        _anchor_checks(new_anchor)  # after migrating the database (once, under the migration lock)
        console_proc = worker_proc = local = None
        if with_worker:
            worker_proc = _local_worker(settings)
        if settings.workers == "in_process":  # the embedded default: a worker process of its own, supervised
            from backend.execution.process import LoopProcess
            from backend.runs import queued

            local = LoopProcess()
            local.start()
            queued.listen(local.poke)
        if console:
            env = dict(
                os.environ,
                CLEANROOM_API_BASE_URL=settings.effective_api_base_url,
                CLEANROOM_CONSOLE_PARENT=str(os.getpid()),  # it ends when `serve` is gone (console/watch.py)
            )
            console_proc = subprocess.Popen([sys.executable, "-m", "console"], env=env)
        typer.echo(
            f"Cleanroom API      http://{settings.host}:{settings.api_port}  (OpenAPI: /schema/openapi.json)"
        )
        if console:
            typer.echo(f"Cleanroom console  http://{settings.host}:{settings.console_port}")
        typer.echo(f"database           {settings.effective_database_url}")
        _say_how_to_begin()
        if processes > 1:
            typer.echo(f"API processes      {processes}")
        try:
            # one process: the app made here; several: uvicorn's supervisor starts each, and each makes its own
            # (`served_app`): the worker of `serve` runs once, in its own process, and every API process wakes it
            os.environ[SERVE_WORKER_HERE] = "1" if local is None else "0"
            uvicorn.run(
                create_app(loop_here=local is None, settle_heap=True)
                if processes == 1
                else "backend.app:served_app",
                factory=processes > 1,
                workers=processes if processes > 1 else None,
                host=settings.host,
                port=settings.api_port,
                log_level="info",
                log_config=None,  # uvicorn's lines go to the root logger: JSON or text, with the request id
                # an idle connection is kept longer than clients keep theirs (httpx, which the MCP SDK and most
                # Python clients use, drops its own after 5 s, uvicorn's default too): with both at 5 s, a
                # request sent on a connection just as the server closed it failed with "Server
                # disconnected without sending a response" (the control-plane bench, 1,000 assistants)
                timeout_keep_alive=KEEP_ALIVE_SECONDS,
                # X-Forwarded-For only from the proxies the operator names (FORWARDED_ALLOW_IPS): from any
                # loopback caller it would choose the address sign-ins are counted on
                proxy_headers=bool(os.environ.get("FORWARDED_ALLOW_IPS")),
            )
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


def _shared_metrics_folder(settings) -> None:
    """prometheus_client's multi-process mode: the API processes and the local worker count requests,
    findings, refusals, charges and failed sign-ins into one folder, emptied at each start, that /metrics
    adds up (backend/metrics.py). Set before prometheus_client is imported; the children inherit it."""
    import shutil

    from backend import filemodes

    folder = settings.data_dir / "metrics"
    shutil.rmtree(folder, ignore_errors=True)
    filemodes.private_dir(folder)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)  # backend.observe.MULTIPROC_ENV


EMPTY_DATABASE = (
    "no company yet. Start one and its first admin (who gets a one-time link to set a password):\n"
    '  cleanroom companies create "Your company" --admin you@example.com\n'
    "(docs/onboarding.md walks the rest; `cleanroom demo seed` fills a database with the demo companies instead)"
)


def _say_how_to_begin() -> None:
    """An empty database says how to begin: the operator's first command (docs/onboarding.md)."""
    from backend.cli.support import run_db
    from backend.tenancy import people

    if not run_db(people.any_company):
        typer.secho(EMPTY_DATABASE, fg=typer.colors.YELLOW)


def _anchor_checks(new_anchor: bool) -> None:
    """The database and its audit anchor belong together (backend/audit/anchor.py `start_problem`): a database
    moved away from its anchor, a new one beside another's anchor, or one behind its anchor is refused."""
    from backend.audit import service
    from backend.cli.support import fail, run_db

    problem = run_db(lambda: service.start_problem(new_anchor=new_anchor))
    if problem is not None:
        fail(problem, 2)


def _forwarding_checks(settings) -> None:
    """Refuses an unfit forwarding secret (backend/tenancy/forwarded.py) before anything starts, and warns
    when the settings show a proxy in front of the API or the console that FORWARDED_ALLOW_IPS does not
    name (the console, started below, checks its own the same way and its key against the API's)."""
    from backend.cli.support import fail
    from backend.tenancy import forwarded

    try:
        forwarded.secret()
    except forwarded.ForwardSecretError as exc:
        fail(str(exc))
    if warning := forwarded.unnamed_proxy("api", settings, os.environ):
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)


def private_umask(settings) -> None:
    """Everything `serve`, its worker and its console create is the service user's alone: umask 077 (the
    console's sessions, logs, whatever a library writes with default modes; what must be shared gets its
    mode explicitly, backend/filemodes.py). The folders others must pass are made first, with the default
    modes, where they are missing: the shared image cache (the guests' QEMU uids read the image in it, other
    checkouts on this host share it; its artifacts are made 0644/0755 when built, sandbox/image.py) and the
    run directory's parent."""
    for folder in (settings.image_cache_dir, settings.effective_run_dir.parent):
        with contextlib.suppress(OSError):  # not ours to make (no root): `cleanroom image build` makes it
            folder.mkdir(parents=True, exist_ok=True)
    os.umask(PRIVATE_UMASK)


def _local_worker(settings) -> subprocess.Popen:
    """`cleanroom worker --host-id local` beside the API, enrolled with a fresh token (a single-host fleet);
    the `local` tokens of earlier starts are revoked as it is made."""
    from backend.cli.support import fail, run_db
    from backend.fleet import service

    if settings.workers != "fleet" or not settings.is_postgres:
        fail("--with-worker is for a fleet: set CLEANROOM_WORKERS=fleet and DATABASE_URL=postgresql://…")
    token = run_db(lambda: service.enroll_replacing("local", created_by="cleanroom serve --with-worker"))
    env = dict(
        os.environ, CLEANROOM_WORKER_TOKEN=token, CLEANROOM_API_BASE_URL=settings.effective_api_base_url
    )
    # on the API's own host, which holds the API's database role anyway (a hypervisor host never does)
    command = ["worker", "--host-id", "local", "--full-db-role"]
    return subprocess.Popen([sys.executable, "-m", "backend", *command], env=env)
