from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import app, ui

from backend.tenancy import forwarded
from console import session
from console.api import Api, ApiError

_LOCAL_PATH = re.compile(r"/(?![/\\])[^\\\x00-\x20\x7f]*")  # one "/", then no "/" or "\\", no blanks


def _safe_next(target: str | None) -> str:
    """Only a path on this console: browsers read `/\\evil`, `/<TAB>/evil` and `//evil` as another host."""
    if not target or not _LOCAL_PATH.fullmatch(target):
        return "/runs"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or parts.path.startswith(("/login", "/logout")):
        return "/runs"
    return target


def register() -> None:
    @ui.page("/")
    def index() -> RedirectResponse:
        return RedirectResponse("/runs" if app.storage.user.get("session") else "/login")

    @ui.page("/logout")
    def logout_page() -> RedirectResponse | None:
        """A link or an old bookmark lands here; loading it signs nobody out, the button does."""
        if not app.storage.user.get("session"):
            return RedirectResponse("/login")
        ui.page_title("Sign out · Cleanroom")
        with ui.column().classes("absolute-center items-center gap-4"), ui.card().classes("w-96 p-6 gap-3"):
            ui.label("Sign out of Cleanroom?").classes("text-xl")
            with ui.row().classes("gap-2"):
                ui.button("Sign out", on_click=session.end_session).mark("confirm-sign-out")
                ui.button("Stay signed in", on_click=lambda: ui.navigate.to("/runs")).props("flat")
        return None

    @ui.page("/login")
    def login_page(request: Request, next: str | None = None) -> RedirectResponse | None:  # noqa: A002
        forwarded.warn_unnamed_proxy(
            "console", request.client.host if request.client else "", request.headers, os.environ
        )
        if app.storage.user.get("session") and session.me():
            return RedirectResponse(_safe_next(next))
        ui.page_title("Sign in · Cleanroom")
        with ui.column().classes("absolute-center items-center gap-4"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("shield", color="primary").classes("text-4xl")
                ui.label("Cleanroom").classes("text-3xl font-semibold text-primary")
            with ui.card().classes("w-96 p-6 gap-3"):
                ui.label("Sign in").classes("text-xl")
                email = ui.input("Email").props("outlined autofocus").classes("w-full").mark("email")
                password = (
                    ui.input("Password", password=True, password_toggle_button=True)
                    .props("outlined")
                    .classes("w-full")
                    .mark("password")
                )
                error = ui.label("").classes("text-negative").mark("login-error")
                error.set_visibility(False)

                async def submit() -> None:
                    error.set_visibility(False)
                    button.props("loading")
                    api = Api(session.config())
                    try:
                        signed_in = await api.login(email.value.strip(), password.value, ui.context.client.ip)
                    except ApiError as exc:
                        error.text = exc.message
                        error.set_visibility(True)
                        return
                    finally:
                        button.props(remove="loading")
                    session.sign_in(api.session or "", signed_in.user)
                    ui.navigate.to(_safe_next(next))

                password.on("keydown.enter", submit)
                button = ui.button("Sign in", on_click=submit).classes("w-full").mark("sign-in")
        return None
