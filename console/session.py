"""Who is signed in, per browser: the API session token and the `/api/me` payload in `app.storage.user`."""

from __future__ import annotations

import contextlib

from fastapi.responses import RedirectResponse
from nicegui import app, ui

from backend.tenancy.schemas import Me
from console.api import Api, ApiConfig, ApiError

_config: ApiConfig | None = None


def configure(config: ApiConfig) -> None:
    global _config
    _config = config


def config() -> ApiConfig:
    if _config is None:
        raise RuntimeError("console.session.configure() was not called")
    return _config


def api() -> Api:
    return Api(config(), app.storage.user.get("session"))


async def close() -> None:
    """At the console's shutdown: closes the one HTTP client every user's `Api` shared."""
    if _config is not None:
        await _config.aclose()


def me() -> Me | None:
    stored = app.storage.user.get("me")
    return Me.model_validate(stored) if stored else None


def role() -> str | None:
    person = me()
    return person.role if person else None


def is_admin() -> bool:
    return role() == "admin"


def sees_company_history() -> bool:
    """An admin or an auditor: every run and flow of the company, and the audit trail (the API decides)."""
    return role() in ("admin", "auditor")


def sign_in(session_token: str, person: Me) -> None:
    app.storage.user["session"] = session_token
    app.storage.user["me"] = person.model_dump(mode="json")


async def end_session() -> None:
    """Signs out with a POST to the API, then forgets the session here. Called from a click (a NiceGUI
    event over the page's own websocket), never from a GET another site could make a browser load."""
    with contextlib.suppress(ApiError):  # an expired session is signed out already
        await api().logout()
    sign_out()
    ui.navigate.to("/login")


def sign_out() -> None:
    try:
        storage = app.storage.user
    except RuntimeError:  # outside a page's request (a timer): the next page load finds the dead session
        return
    storage.pop("session", None)
    storage.pop("me", None)


def redirect_if_signed_out(
    path: str, *, admin: bool = False, auditor: bool = False
) -> RedirectResponse | None:
    """The response to return from a page when nobody (or no admin, for admin pages; `auditor`: an auditor
    may read it too) is signed in."""
    if not app.storage.user.get("session") or not me():
        return RedirectResponse(f"/login?next={path}")
    if admin and not (is_admin() or (auditor and sees_company_history())):
        return RedirectResponse("/runs")
    return None
