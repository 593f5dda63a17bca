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
from console.pages import sso

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
    async def login_page(
        request: Request,
        next: str | None = None,  # noqa: A002 - the query name
        email: str = "",
    ) -> RedirectResponse | None:
        forwarded.warn_unnamed_proxy(
            "console", request.client.host if request.client else "", request.headers, os.environ
        )
        if app.storage.user.get("session") and session.me():
            return RedirectResponse(_safe_next(next))
        ui.page_title("Sign in · Cleanroom")
        try:
            has_company = (await Api(session.config()).setup_state()).has_company
        except ApiError:
            has_company = True  # the API will say what is wrong at sign-in
        with ui.column().classes("absolute-center items-center gap-4"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("shield", color="primary").classes("text-4xl")
                ui.label("Cleanroom").classes("text-3xl font-semibold text-primary")
            if not has_company:  # an empty database: nobody could sign in; say how to begin, nothing else
                with ui.card().classes("w-96 p-6 gap-2").mark("no-company"):
                    ui.label("No company yet").classes("text-xl")
                    ui.label(
                        "The operator of this Cleanroom starts one on the server: "
                        'cleanroom companies create "Name" --admin you@example.com'
                    ).classes("text-sm")
                return None
            with ui.card().classes("w-96 p-6 gap-3"):
                ui.label("Sign in").classes("text-xl")
                email_input = ui.input("Email", value=email).props("outlined autofocus").classes("w-full")
                email_input.mark("email")
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
                        signed_in = await api.login(
                            email_input.value.strip(), password.value, ui.context.client.ip
                        )
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
                ui.link("Forgot your password?", "/forgot-password").classes("text-sm").mark("forgot-link")

                # a company's single sign-on, offered once the address's domain is one it serves
                sso_button = (
                    ui.button("", on_click=lambda: sso.start(email_input.value.strip(), _safe_next(next)))
                    .props("outline no-caps")
                    .classes("w-full")
                    .mark("sso-sign-in")
                )
                sso_button.set_visibility(False)

                async def offer_sso() -> None:
                    address = email_input.value.strip()
                    if "@" not in address or "." not in address.rpartition("@")[2]:
                        sso_button.set_visibility(False)
                        return
                    try:
                        offer = await Api(session.config()).sso_offer(address)
                    except ApiError:
                        offer = None
                    if address != email_input.value.strip():
                        return  # typed on meanwhile: the newer check decides
                    if offer and offer.available:
                        sso_button.text = f"Sign in with {offer.label}"
                    sso_button.set_visibility(bool(offer and offer.available))

                email_input.props("debounce=300").on_value_change(offer_sso)
        return None
