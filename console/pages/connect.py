"""The consent page of Cleanroom's OAuth authorization server (backend/tenancy/oauth.py): an assistant asks to
connect, and the signed-in person sees which one (the name it registered with, and where its code would go) and
allows it the assistant scope, or denies it. Allowing is a person's decision (the API refuses it to any token);
the browser then goes back to the assistant (its redirect URI, with a code or with `access_denied`)."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.tenancy.schemas import ConnectionRequest
from console import session, theme, widgets
from console.api import Api, ApiError
from console.widgets import FAILED

CAN = [
    "read the data you may read, and search your Drive",
    "upload files to your Drive",
    "propose code runs and flows, revise them and ask follow-ups",
]
CANNOT = [
    "approve or reject a run, accept a proposed change, schedule anything",
    "manage tokens, connections or settings",
    "see anything you cannot see",
]


def register() -> None:
    @ui.page("/connect")
    async def connect_page(request_id: str = "") -> RedirectResponse | None:
        here = f"/connect?request_id={quote(request_id, safe='')}"
        if redirect := session.redirect_if_signed_out(quote(here, safe="/")):
            return redirect
        api = session.api()
        with theme.frame("Connect an assistant"):
            box = ui.column().classes("w-full max-w-screen-md gap-4").mark("consent")
        await ui.context.client.connected()
        try:
            asked = await api.connection_request(request_id) if request_id else None
        except ApiError as exc:
            asked = None
            if exc.status == 401:
                session.sign_out()
                ui.navigate.to(f"/login?next={quote(here, safe='')}")
                return None
        with box:
            if asked is None:
                widgets.empty_state(
                    "This connection request is not open any more (it was answered, or it expired after ten "
                    "minutes). Start connecting again from your assistant.",
                    "link_off",
                )
                return None
            ConsentCard(api, request_id, asked)
        return None


class ConsentCard:
    def __init__(self, api: Api, request_id: str, asked: ConnectionRequest) -> None:
        self.api = api
        self.request_id = request_id
        name = asked.client_name or "An assistant with no name"
        host = urlsplit(asked.redirect_uri).netloc or asked.redirect_uri
        with ui.card().classes("w-full gap-3"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("hub", color="primary").classes("text-2xl")
                ui.label(f"“{name}” asks to work with Cleanroom as your assistant").classes(
                    "text-lg font-medium"
                ).mark("consent-client")
            ui.label(
                "The name is the assistant's own claim. Allow it only if you started connecting it just now, "
                f"and only if you recognise where it sends you back: {host}."
            ).classes("text-sm text-grey-8")
            with ui.row().classes("items-center gap-2 w-full no-wrap"):
                ui.label("Returns to").classes("text-sm text-grey-7 w-24")
                ui.label(asked.redirect_uri).classes("cr-code break-all").mark("consent-redirect")
            with ui.row().classes("items-start gap-8 w-full"):
                with ui.column().classes("gap-1"):
                    ui.label("It will be able to").classes("font-medium")
                    for line in CAN:
                        ui.label(f"✓ {line}").classes("text-sm")
                with ui.column().classes("gap-1"):
                    ui.label("It will never").classes("font-medium")
                    for line in CANNOT:
                        ui.label(f"✗ {line}").classes("text-sm")
            ui.label(
                "Every run it proposes waits for your approval. You can disconnect it at any time on the "
                "Assistant access page."
            ).classes("text-sm text-grey-7")
            with ui.row().classes("justify-end w-full gap-2"):
                self.deny_button = (
                    ui.button("Deny", icon="block", on_click=lambda: self.answer(False))
                    .props("flat no-caps")
                    .mark("consent-deny")
                )
                self.allow_button = (
                    ui.button("Allow", icon="check", on_click=lambda: self.answer(True))
                    .props("no-caps")
                    .mark("consent-allow")
                )

    async def answer(self, allow: bool) -> None:
        self.allow_button.disable()
        self.deny_button.disable()
        result = await widgets.call(self.api.answer_connection(self.request_id, allow))
        if result is FAILED:
            self.allow_button.enable()
            self.deny_button.enable()
            return
        ui.notify("Connected: returning to the assistant." if allow else "Denied.", type="positive")
        ui.navigate.to(result.redirect_to)  # type: ignore[attr-defined]
