"""Single sign-on: the page the company's provider sends the browser back to, and the admin's settings.

The state the API handed out at the start is kept in this browser's storage and must come back unchanged: a
return this browser did not start (a link someone else began, to sign the victim into the sender's account)
is refused here before the API is asked, and the API refuses a state it did not issue or already used."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import app, ui

from backend.tenancy.sso_schemas import SsoSettings
from console import session, theme, widgets
from console.api import Api, ApiError, session_from_set_cookie
from console.widgets import FAILED

STATE_KEY = "sso_state"
NEXT_KEY = "sso_next"


async def start(email: str, next_path: str) -> None:
    """Send this browser to the provider of the address's company (a click on the sign-in page)."""
    try:
        begun = await Api(session.config()).sso_start(email)
    except ApiError as exc:
        ui.notify(exc.message, type="negative", multi_line=True)
        return
    app.storage.user[STATE_KEY] = begun.state
    app.storage.user[NEXT_KEY] = next_path
    ui.navigate.to(begun.authorization_url)


def _refusal(message: str) -> None:
    ui.page_title("Sign-in refused · Cleanroom")
    with ui.column().classes("absolute-center items-center gap-4"), ui.card().classes("w-96 p-6 gap-3"):
        ui.label("Single sign-on did not sign you in").classes("text-xl")
        ui.label(message).classes("text-negative").mark("sso-error")
        ui.link("Back to sign-in", "/login")


def register() -> None:
    @ui.page("/sso/callback", response_timeout=30)  # the API asks the provider twice or three times
    async def sso_return(
        code: str | None = None, state: str | None = None, error: str | None = None
    ) -> RedirectResponse | None:
        expected = app.storage.user.pop(STATE_KEY, None)
        next_path = app.storage.user.pop(NEXT_KEY, None) or "/runs"
        if error:
            _refusal(f"The provider answered: {error}.")
            return None
        if not code or not state or not expected or not hmac.compare_digest(str(expected), state):
            _refusal("This sign-in was not started in this browser. Start again from the sign-in page.")
            return None
        api = Api(session.config())
        try:
            result, response = await api.sso_return(code, state)
        except ApiError as exc:
            _refusal(exc.message)
            return None
        token = session_from_set_cookie(response)
        if not token:
            _refusal("The API signed you in but set no session.")
            return None
        session.sign_in(token, result.user)
        return RedirectResponse(next_path)

    @ui.page("/sso-settings")
    async def sso_settings_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/sso-settings", admin=True):
            return redirect
        with theme.frame("Single sign-on"):
            ui.label(
                'People whose e-mail domain your OpenID Connect provider serves are offered "Sign in with '
                'SSO" on the sign-in page. Only people already in the company may sign in through it, unless '
                "you turn on just-in-time membership (then a new address of those domains joins as a member)."
            ).classes("text-sm text-grey-7")
            container = ui.column().classes("w-full gap-4")
        api = session.api()
        await ui.context.client.connected()
        await widgets.load_into(container, api.sso_settings, lambda current: SsoForm(container, current, api))
        return None


class SsoForm:
    def __init__(self, container: ui.element, current: SsoSettings | None, api: Api) -> None:
        self.container = container
        self.api = api
        self.render(current)

    def render(self, current: SsoSettings | None) -> None:
        self.container.clear()
        with self.container, ui.card().classes("w-full max-w-2xl gap-2").mark("sso-form"):
            self.issuer = (
                ui.input("Issuer (https://…)", value=current.issuer if current else "")
                .classes("w-full")
                .mark("sso-issuer")
            )
            self.client_id = (
                ui.input("Client ID", value=current.client_id if current else "")
                .classes("w-full")
                .mark("sso-client-id")
            )
            hint = "stored; type a new one to replace it" if current and current.client_secret_set else ""
            self.secret = (
                ui.input("Client secret", password=True, placeholder=hint)
                .classes("w-full")
                .mark("sso-client-secret")
            )
            self.domains = (
                ui.input(
                    "E-mail domains it serves (comma separated)",
                    value=", ".join(current.domains) if current else "",
                )
                .classes("w-full")
                .mark("sso-domains")
            )
            self.jit = ui.switch(
                "Just-in-time membership (a new address of these domains joins as a member)",
                value=current.jit_membership if current else False,
            ).mark("sso-jit")
            self.enabled = ui.switch(
                "Offered on the sign-in page", value=current.enabled if current else True
            )
            self.enabled.mark("sso-enabled")
            redirect = current.redirect_uri if current else None
            if redirect:
                ui.label(f"Register this redirect URI at the provider: {redirect}").classes(
                    "text-sm text-grey-7"
                ).mark("sso-redirect-uri")
            if current and current.client_secret_set:
                ui.label("A client secret is stored (it is never shown).").classes("text-sm").mark(
                    "sso-secret-set"
                )
            with ui.row().classes("gap-2"):
                ui.button("Save", on_click=self.save).mark("sso-save")
                if current:
                    ui.button("Remove", on_click=self.remove).props("flat color=negative").mark("sso-remove")

    async def save(self) -> None:
        body: dict[str, Any] = {
            "issuer": self.issuer.value.strip(),
            "client_id": self.client_id.value.strip(),
            "domains": [d.strip() for d in self.domains.value.split(",") if d.strip()],
            "jit_membership": bool(self.jit.value),
            "enabled": bool(self.enabled.value),
        }
        if self.secret.value:
            body["client_secret"] = self.secret.value
        saved = await widgets.call(self.api.configure_sso(**body))
        if saved is FAILED:
            return
        ui.notify("Single sign-on saved", type="positive")
        self.render(saved)  # type: ignore[arg-type]

    async def remove(self) -> None:
        if await widgets.call(self.api.remove_sso()) is FAILED:
            return
        ui.notify("Single sign-on removed")
        self.render(None)
