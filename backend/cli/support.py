"""Running a service coroutine from a CLI command: same database, same services as the API."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import typer

from backend import db
from backend.errors import AppError

T = TypeVar("T")


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def run_db(fn: Callable[[], Awaitable[T]], *, create: bool = True) -> T:
    async def main() -> Any:
        db.configure()
        await db.start_pool()
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
