"""Running a service coroutine from a CLI command: same database, same services as the API.

Imported by every command module at start, so it imports nothing heavy itself: the database layer (Piccolo)
and the error types (Litestar) load when a command first calls `run_db`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import typer

T = TypeVar("T")


def group(help: str, *, no_args_is_help: bool = True, **kwargs: Any) -> typer.Typer:
    """A command group whose help Click prints plainly, as Typer does without Rich installed: Rich's help
    renderer (rich, markdown_it, pygments) costs about as much start-up as everything else `--help` loads."""
    return typer.Typer(no_args_is_help=no_args_is_help, rich_markup_mode=None, help=help, **kwargs)


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def require_database() -> None:
    """A command that only reads (audit verify, migrate --check) refuses a database that is not there rather
    than making an empty one and reporting on that: a SQLite file missing at the configured path (a moved or
    not yet restored database) is an error. PostgreSQL refuses a missing database itself, at connection."""
    from backend.settings import get_settings

    url = get_settings().effective_database_url
    if url.startswith("sqlite:///"):
        from pathlib import Path

        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            fail(
                f"no database at {path} (DATABASE_URL / CLEANROOM_DATA_DIR): nothing to check. Restore it there, "
                "or point the settings at it (docs/operating.md)"
            )


def run_db(fn: Callable[[], Awaitable[T]], *, create: bool = True) -> T:
    import asyncio

    from backend import db
    from backend.errors import AppError

    async def main() -> Any:
        db.configure()
        await db.start_pool(timeouts=False)  # the operator's commands: no API time limits
        try:
            if create:
                await db.create_schema()
            return await fn()
        finally:
            await db.close_pool()

    try:
        return asyncio.run(main())
    except AppError as exc:
        detail = exc.detail if isinstance(exc.detail, str) else exc.detail.get("message", exc.detail)
        fail(f"{detail}", 2 if exc.status_code in (401, 403, 404) else 1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if type(exc).__name__ == "InvalidCatalogNameError":  # asyncpg's: the database named is not there
            fail(f"{exc} (DATABASE_URL): nothing to work on. Create or restore it first (docs/operating.md)")
        raise
