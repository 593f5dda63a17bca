"""The console process: `python -m console` (started by `cleanroom serve`)."""

from __future__ import annotations

import secrets
from pathlib import Path

from nicegui import ui

from backend.settings import get_settings
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
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def run() -> None:
    settings = get_settings()
    build(ApiConfig(settings.effective_api_base_url))
    ui.run(
        host=settings.host,
        port=settings.console_port,
        title="Cleanroom",
        reload=False,
        show=False,
        storage_secret=storage_secret(settings.data_dir),
        favicon="🛡️",
    )
