"""A person's own password: the page an invitation or reset link opens (`/set-password?token=…`), the
"forgot password" request, and changing it signed in (the old one required; every other session ends); and
what the person is told of (notifications)."""

from __future__ import annotations

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.notify.schemas import Preferences
from console import session, theme, widgets
from console.api import Api, ApiError
from console.widgets import FAILED

POLICY = "At least 12 characters, and not a common or guessable password (a few unrelated words work well)."


def _card(title: str) -> ui.card:
    ui.page_title(f"{title} · Cleanroom")
    with ui.column().classes("absolute-center items-center gap-4"):
        with ui.row().classes("items-center gap-2"):
            ui.icon("shield", color="primary").classes("text-4xl")
            ui.label("Cleanroom").classes("text-3xl font-semibold text-primary")
        card = ui.card().classes("w-96 p-6 gap-3")
    with card:
        ui.label(title).classes("text-xl")
    return card


def register() -> None:
    @ui.page("/set-password")
    async def set_password_page(token: str = "") -> None:
        card = _card("Set your password")
        api = Api(session.config())
        await ui.context.client.connected()
        try:
            info = await api.password_link(token) if token else None
        except ApiError as exc:
            info = None
            message = exc.message
        else:
            message = "This link is not valid: ask your admin for a new one."
        with card:
            if info is None:
                ui.label(message).classes("text-negative").mark("link-error")
                ui.link("Sign in", "/login")
                return
            what = "join" if info.kind == "invite" else "set a new password for"
            ui.label(f"{info.email}: {what} {info.company}.").mark("link-info")
            ui.label(POLICY).classes("text-sm text-grey-7")
            first = ui.input("New password", password=True, password_toggle_button=True).classes("w-full")
            first.mark("new-password")
            second = ui.input("Repeat it", password=True).classes("w-full").mark("repeat-password")
            error = ui.label("").classes("text-negative").mark("set-password-error")

            async def submit() -> None:
                error.text = ""
                if first.value != second.value:
                    error.text = "The two passwords differ."
                    return
                try:
                    await api.set_password(token, first.value)
                except ApiError as exc:
                    error.text = exc.message
                    return
                card.clear()
                with card:
                    ui.label("Your password is set.").classes("text-xl").mark("password-set")
                    ui.link("Sign in", f"/login?email={info.email}").mark("to-sign-in")

            ui.button("Set password", on_click=submit).classes("w-full").mark("set-password")

    @ui.page("/forgot-password")
    def forgot_page() -> None:
        card = _card("Forgot your password?")
        with card:
            email = ui.input("Email").classes("w-full").mark("forgot-email")
            answer = ui.label("").classes("text-sm").mark("forgot-answer")

            async def submit() -> None:
                try:
                    said = await Api(session.config()).forgot_password(email.value.strip())
                except ApiError as exc:
                    answer.text = exc.message
                    return
                answer.text = said.message[:1].upper() + said.message[1:] + "."

            ui.button("Send me a link", on_click=submit).classes("w-full").mark("send-reset")
            ui.link("Back to sign-in", "/login")

    @ui.page("/account")
    async def account_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/account"):
            return redirect
        with theme.frame("Your account"), ui.card().classes("w-full max-w-md gap-2").mark("change-password"):
            ui.label("Change your password").classes("text-lg font-medium")
            ui.label(POLICY + " Your other sessions end.").classes("text-sm text-grey-7")
            old = ui.input("Current password", password=True).classes("w-full").mark("old-password")
            new = ui.input("New password", password=True, password_toggle_button=True).classes("w-full")
            new.mark("new-password")

            async def change() -> None:
                done = await widgets.call(session.api().change_password(old.value, new.value))
                if done is FAILED:
                    return
                old.value, new.value = "", ""
                ended = done.other_sessions_ended  # type: ignore[attr-defined]
                ui.notify(f"Password changed; {ended} other session(s) ended", type="positive")

            ui.button("Change password", on_click=change).mark("change-password-button")
        with ui.card().classes("w-full max-w-md gap-2").mark("notifications") as notifications:
            pass
        await ui.context.client.connected()
        await NotificationChoices(notifications, session.api()).load()
        return None


class NotificationChoices:
    """Your account → Notifications: mail on or off, and a switch per event (GET/PUT /api/me/notifications)."""

    def __init__(self, container: ui.element, api: Api) -> None:
        self.container = container
        self.api = api

    async def load(self) -> None:
        await widgets.load_into(self.container, self.api.notification_preferences, self.render)

    def render(self, prefs: Preferences) -> None:
        ui.label("Notifications").classes("text-lg font-medium")
        ui.label(
            "Mails name the thing and link to its page here; they never carry code or record values."
            + ("" if prefs.mail_configured else " This installation sends no mail (no SMTP server is set).")
        ).classes("text-sm text-grey-7")
        mail = ui.switch("E-mail me", value=prefs.email_enabled).mark("notify-email")
        switches = {
            event.name: ui.switch(event.label, value=event.name not in prefs.muted).mark(
                f"notify-{event.name}"
            )
            for event in prefs.events
        }

        async def save() -> None:
            muted = [name for name, switch in switches.items() if not switch.value]
            done = await widgets.call(
                self.api.set_notification_preferences(email_enabled=mail.value, muted=muted)
            )
            if done is not FAILED:
                ui.notify("Saved.", type="positive")

        ui.button("Save", on_click=save).mark("notify-save")
