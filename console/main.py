"""The console process: `python -m console` (started by `cleanroom serve`)."""

from __future__ import annotations

import secrets
from pathlib import Path

from fastapi import FastAPI
from nicegui import app, ui
from starlette.middleware.trustedhost import TrustedHostMiddleware

from backend import filemodes
from backend.settings import Settings, get_settings
from backend.tenancy.origin import host_names
from console import pages, session, theme
from console.api import ApiConfig


def build(config: ApiConfig) -> None:
    """Point the console at an API and define its pages (tests call this with an injected transport)."""
    session.configure(config)
    ui.add_css(theme.CSS, shared=True)
    pages.register()


def storage_secret(data_dir: Path) -> str:
    """Signs the per-browser storage cookie; kept in the data directory so restarts keep people signed in."""
    path = data_dir / "console_storage_secret"
    if not path.exists():
        filemodes.new_private_file(path, secrets.token_urlsafe(32).encode())  # 0600 from the start
    return path.read_text().strip()


def guard_hosts(fastapi_app: FastAPI, settings: Settings) -> None:
    """DNS rebinding: a page on evil.example, re-pointed at 127.0.0.1, would drive the console (and sign in
    with a known password). The console answers only to the names the API does; others get 400."""
    fastapi_app.add_middleware(TrustedHostMiddleware, allowed_hosts=host_names(settings), www_redirect=False)


def run() -> None:
    settings = get_settings()
    build(ApiConfig(settings.effective_api_base_url))
    guard_hosts(app, settings)
    ui.run(
        host=settings.host,
        port=settings.console_port,
        title="Cleanroom",
        reload=False,
        show=False,
        storage_secret=storage_secret(settings.data_dir),
        favicon="🛡️",
    )
