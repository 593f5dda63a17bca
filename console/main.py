"""The console process: `python -m console` (started by `cleanroom serve`)."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from nicegui import app, ui
from nicegui.storage import Storage
from starlette.middleware.trustedhost import TrustedHostMiddleware

from backend import filemodes, observe
from backend.settings import Settings, get_settings
from backend.tenancy import forwarded
from backend.tenancy.origin import host_names
from console import forwarding, pages, session, theme
from console import storage as console_storage
from console.api import ApiConfig

log = logging.getLogger("cleanroom.console")


def build(config: ApiConfig) -> None:
    """Point the console at an API and define its pages (tests call this with an injected transport)."""
    session.configure(config)
    app.on_shutdown(session.close)
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


def cookie_options(settings: Settings) -> dict[str, Any]:
    """NiceGUI's per-browser cookie (it names the browser's storage, which holds the API session):
    SameSite=Lax, not Strict: it changes nothing on its own (every change is a websocket event or the API's
    Origin-checked POST), and under Strict a link from mail or chat would arrive without it, and the page
    would set a fresh one in its place, signing the person out. Secure when people reach the console or the
    API over https. HttpOnly is Starlette's own."""
    https = settings.effective_console_url.lower().startswith("https://")
    return {"same_site": "lax", "https_only": settings.cookies_secure or https}


def run() -> None:
    settings = get_settings()
    expected = console_storage.storage_path(settings).resolve()
    if Storage.path != expected:  # imported before `console_storage.prepare` (console/__main__.py) ran
        raise RuntimeError(
            f"NiceGUI would keep sessions in {Storage.path}, not {expected}: start `python -m console`"
        )
    try:
        forwarded.secret()  # an unfit forwarding secret: refuse before serving anyone
    except forwarded.ForwardSecretError as exc:
        raise SystemExit(f"cleanroom console: {exc}") from None
    if warning := forwarded.unnamed_proxy("console", settings, os.environ):
        log.warning(warning)
    observe.configure_logging()  # JSON lines or text (CLEANROOM_LOG_FORMAT), as the API's
    config = ApiConfig(settings.effective_api_base_url)
    build(config)
    guard_hosts(app, settings)
    # a page's id (its caller's X-Request-Id, or a fresh one) goes with every API call made for it
    app.add_middleware(observe.RequestIdMiddleware)
    refused: list[bool] = []

    def mismatch() -> None:
        refused.append(True)
        app.shutdown()

    app.on_startup(lambda: forwarding.check(config, mismatch))  # the API shares the key, else stop
    ui.run(
        host=settings.host,
        port=settings.console_port,
        title="Cleanroom",
        reload=False,
        show=False,
        storage_secret=storage_secret(settings.data_dir),
        session_middleware_kwargs=cookie_options(settings),
        favicon="🛡️",
        # X-Forwarded-For only from the proxies the operator names: a local account must not choose the
        # browser address the console forwards with a sign-in (backend/tenancy/forwarded.py)
        proxy_headers=bool(os.environ.get("FORWARDED_ALLOW_IPS")),
    )
    if refused:
        raise SystemExit(f"cleanroom console: {forwarding.MISMATCH}")
