"""People (admin): invite by e-mail, resend or revoke an invitation, send a password reset, change a role,
deactivate and reactivate. An auditor reads the list; every change is the API's to allow (admin, session)."""

from __future__ import annotations

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.tenancy.schemas import LinkIssued, PersonDetail
from console import session, theme, widgets
from console.api import Api
from console.widgets import FAILED

ROLES = ["member", "admin", "auditor"]
STATUS_COLORS = {"active": "positive", "invited": "orange", "deactivated": "grey"}


def register() -> None:
    @ui.page("/people")
    async def people_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/people", admin=True, auditor=True):
            return redirect
        admin = session.is_admin()
        with theme.frame("People"):
            link_box = ui.column().classes("w-full")
            if admin:
                with ui.card().classes("w-full gap-2").mark("invite-form"):
                    ui.label("Invite a person").classes("text-lg font-medium")
                    with ui.row().classes("items-end gap-2 w-full"):
                        email = ui.input("E-mail").classes("w-64").mark("invite-email")
                        name = ui.input("Name (optional)").classes("w-48").mark("invite-name")
                        role = (
                            ui.select(ROLES, value="member", label="Role").classes("w-32").mark("invite-role")
                        )
                        invite_button = ui.button("Invite").mark("invite")
            listing = ui.column().classes("w-full")
        page = PeoplePage(session.api(), listing, link_box, admin)
        if admin:

            async def invite() -> None:
                issued = await widgets.call(
                    page.api.invite(email.value.strip(), name=name.value, role=role.value)
                )
                if issued is FAILED:
                    return
                email.value, name.value = "", ""
                page.show_link(issued)  # type: ignore[arg-type]
                await page.load()

            invite_button.on_click(invite)
        await ui.context.client.connected()
        await page.load()
        return None


class PeoplePage:
    def __init__(self, api: Api, listing: ui.element, link_box: ui.element, admin: bool) -> None:
        self.api = api
        self.listing = listing
        self.link_box = link_box
        self.admin = admin

    async def load(self) -> None:
        await widgets.load_into(self.listing, self.api.people, self.render)

    def show_link(self, issued: LinkIssued) -> None:
        """A link is shown this once (no mail configured); a mailed one only says so."""
        self.link_box.clear()
        with self.link_box, ui.card().classes("w-full bg-amber-1 gap-1").mark("issued-link"):
            what = "Invitation" if issued.kind == "invite" else "Password reset"
            if issued.mailed or not issued.link:
                ui.label(f"{what} sent to {issued.email}.")
                return
            ui.label(
                f"{what} for {issued.email}: no mail is configured, so pass this link on yourself. It is shown "
                f"only now, works once, and expires {widgets.when(issued.expires_at)}."
            ).classes("text-sm")
            ui.label(issued.link).classes("cr-pre w-full").mark("issued-link-url")

    def render(self, people: list[PersonDetail]) -> None:
        if not people:
            widgets.empty_state("Nobody yet.")
            return
        for person in people:
            with (
                ui.card().classes("w-full").mark(f"person-{person.email}"),
                ui.row().classes("items-center gap-3 w-full"),
            ):
                with ui.column().classes("gap-0 grow min-w-0"):
                    ui.label(person.name or person.email).classes("font-medium")
                    ui.label(person.email).classes("text-sm text-grey-7")
                ui.badge(person.status, color=STATUS_COLORS.get(person.status, "grey")).mark(
                    f"status-{person.email}"
                )
                if not self.admin:
                    ui.label(person.role)
                    continue
                ui.select(
                    ROLES,
                    value=person.role,
                    on_change=lambda e, p=person: self.set_role(p, e.value),
                ).classes("w-32").mark(f"role-{person.email}")
                if person.status == "invited":
                    ui.button("Resend", on_click=lambda p=person: self.resend(p)).props("flat").mark(
                        f"resend-{person.email}"
                    )
                    ui.button("Revoke", on_click=lambda p=person: self.revoke(p)).props("flat").mark(
                        f"revoke-{person.email}"
                    )
                elif person.status == "active":
                    ui.button("Reset password", on_click=lambda p=person: self.reset(p)).props("flat").mark(
                        f"reset-{person.email}"
                    )
                if person.active:
                    ui.button("Deactivate", on_click=lambda p=person: self.set_active(p, False)).props(
                        "flat color=negative"
                    ).mark(f"deactivate-{person.email}")
                else:
                    ui.button("Reactivate", on_click=lambda p=person: self.set_active(p, True)).props(
                        "flat"
                    ).mark(f"reactivate-{person.email}")

    async def set_role(self, person: PersonDetail, role: str) -> None:
        if role == person.role:
            return
        # the list is loaded again before the notice, so what the notice says is what the list shows
        changed = await widgets.call(self.api.set_role(person.id, role)) is not FAILED
        await self.load()
        if changed:
            ui.notify(f"{person.email} is now {role}", type="positive")

    async def resend(self, person: PersonDetail) -> None:
        issued = await widgets.call(self.api.resend_invitation(person.id))
        if issued is not FAILED:
            self.show_link(issued)  # type: ignore[arg-type]

    async def revoke(self, person: PersonDetail) -> None:
        if await widgets.call(self.api.revoke_links(person.id)) is not FAILED:
            ui.notify(f"{person.email}'s link no longer works")
            self.link_box.clear()

    async def reset(self, person: PersonDetail) -> None:
        issued = await widgets.call(self.api.send_password_reset(person.id))
        if issued is not FAILED:
            self.show_link(issued)  # type: ignore[arg-type]

    async def set_active(self, person: PersonDetail, active: bool) -> None:
        change = self.api.reactivate(person.id) if active else self.api.deactivate(person.id)
        changed = await widgets.call(change) is not FAILED
        await self.load()
        if changed:
            ui.notify(
                f"{person.email} reactivated"
                if active
                else f"{person.email} deactivated: their sessions and API tokens ended"
            )
