"""`cleanroom mcp --api URL` (the MCP server over stdio, for desktop assistants) and `cleanroom bench mcp`."""

from __future__ import annotations

import os
import sys

import typer

TOKEN_ENV = "CLEANROOM_TOKEN"


async def serve_stdio(api_url: str, token: str, console_url: str | None) -> None:
    """Serve MCP on stdin/stdout; every tool call goes to the API at `api_url` with `token`."""
    import httpx

    from backend.mcp.api import ApiError, CleanroomApi

    async with httpx.AsyncClient(base_url=api_url.rstrip("/"), timeout=httpx.Timeout(120.0)) as client:
        api = CleanroomApi(client, token)
        try:
            me = await api.me()
            print(f"cleanroom mcp: {me.email} ({me.company.name}) via {api_url}", file=sys.stderr)
        except ApiError as exc:
            if exc.status == 401:
                print(f"cleanroom mcp: {exc}", file=sys.stderr)
                raise SystemExit(1) from None
            print(f"cleanroom mcp: warning: {exc}", file=sys.stderr)  # the API may come up later
        from backend.mcp.tools import build_server  # the MCP server's SDK, after a refused token has ended it

        server = build_server(lambda _ctx: api, console_url=console_url)
        await server.run_stdio_async()


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    from backend.benches import add_suite

    @app.command("mcp")
    def mcp(
        api: str = typer.Option(
            None, "--api", help="the Cleanroom API's URL (default: CLEANROOM_API_BASE_URL)"
        ),
        console: str = typer.Option(
            None, "--console", help="the console's URL, for approval links (default: CLEANROOM_CONSOLE_URL)"
        ),
    ) -> None:
        """The MCP server over stdio for desktop assistants; the API token comes from CLEANROOM_TOKEN.

        A client of the HTTP API (no database access of its own): the token's assistant scope is all it has.
        """
        import anyio

        from backend.settings import get_settings

        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            typer.echo(
                f"set {TOKEN_ENV} to a personal API token (create one in the console, or POST /api/me/tokens)",
                err=True,
            )
            raise typer.Exit(2)
        settings = get_settings()
        anyio.run(
            serve_stdio,
            api or settings.effective_api_base_url,
            token,
            console or settings.effective_console_url,
        )

    def _bench() -> dict:
        from backend.benches.mcp import run_mcp_bench

        return run_mcp_bench()

    add_suite(
        bench_app,
        "mcp",
        _bench,
        "MCP overhead: get_run over /mcp vs plain HTTP for a finished run (p50 ratio), and "
        "propose→approval-visible latencies (real API server, real VM run).",
    )
