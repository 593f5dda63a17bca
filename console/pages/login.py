from __future__ import annotations

import contextlib

from fastapi.responses import RedirectResponse
from nicegui import app, ui

from console import session
from console.api import Api, ApiError


def _safe_next(target: str | None) -> str:
    if target and target.startswith("/") and not target.startswith("//") and not target.startswith("/login"):
        return target
    return "/runs"


def register() -> None:
    @ui.page("/")
    def index() -> RedirectResponse:
        return RedirectResponse("/runs" if app.storage.user.get("session") else "/login")

    @ui.page("/logout")
    async def logout_page() -> RedirectResponse:
        with contextlib.suppress(ApiError):  # an expired session is signed out already
            await session.api().logout()
        session.sign_out()
        return RedirectResponse("/login")

    @ui.page("/login")
    def login_page(next: str | None = None) -> RedirectResponse | None:  # noqa: A002 - the query name
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
                    try:
                        body = await Api(session.config()).login(email.value.strip(), password.value)
                    except ApiError as exc:
                        error.text = exc.message
                        error.set_visibility(True)
                        return
                    finally:
                        button.props(remove="loading")
                    session.sign_in(body["session"], body["user"])
                    ui.navigate.to(_safe_next(next))

                password.on("keydown.enter", submit)
                button = ui.button("Sign in", on_click=submit).classes("w-full").mark("sign-in")
        return None
