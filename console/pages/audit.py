"""Audit (admin, auditor): search the hash-chained trail and verify the chain."""

from __future__ import annotations

from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from console import session, theme, widgets
from console.widgets import FAILED

PAGE = 200
MAX_SHOWN = 1000  # the API's largest page

SUBJECTS = [
    "",
    "run",
    "flow",
    "action_item",
    "company",
    "user",
    "drive_file",
    "schedule",
    "session",
    "api_token",
]


def register() -> None:
    @ui.page("/audit")
    async def audit_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/audit", admin=True, auditor=True):
            return redirect
        api = session.api()
        with theme.frame("Audit trail"):
            with ui.card().classes("w-full").mark("verify"):
                with ui.row().classes("items-center gap-4"):
                    ui.button("Verify chain", icon="verified", on_click=lambda: verify()).mark(
                        "verify-button"
                    )
                    ui.label(
                        "Recomputes every entry's hash and its link to the one before; any edit or gap shows."
                    ).classes("text-sm text-grey-7")
                verdict = ui.column().classes("w-full")
            with ui.row().classes("items-end gap-3 w-full"):
                query = (
                    ui.input("Search (who, what, subject id)")
                    .props("dense outlined clearable")
                    .classes("w-72")
                )
                query.mark("audit-q")
                action = ui.input("Action (exact)").props("dense outlined clearable").classes("w-48")
                subject = (
                    ui.select({s: s or "any subject" for s in SUBJECTS}, value="", label="Subject")
                    .props("dense outlined")
                    .classes("w-44")
                )
                query.on("keydown.enter", lambda: search())
                ui.button("Search", icon="search", on_click=lambda: search()).mark("audit-search")
            results = ui.column().classes("w-full")
        shown = {"limit": PAGE}

        async def fetch() -> list[dict[str, Any]]:
            return await api.audit(
                q=(query.value or "").strip() or None,
                action=(action.value or "").strip() or None,
                subject_type=subject.value or None,
                limit=shown["limit"],
            )

        def render(entries: list[dict[str, Any]]) -> None:
            widgets.audit_table(entries)
            if len(entries) >= shown["limit"] and shown["limit"] < MAX_SHOWN:
                ui.button("Show older entries", icon="expand_more", on_click=more).props("flat").mark(
                    "audit-more"
                )

        async def more() -> None:
            shown["limit"] = min(shown["limit"] + PAGE, MAX_SHOWN)
            await widgets.load_into(results, fetch, render, "Loading older entries…")

        async def search() -> None:
            shown["limit"] = PAGE
            await widgets.load_into(results, fetch, render, "Searching the audit trail…")

        async def verify() -> None:
            verdict.clear()
            with verdict:
                widgets.loading("Verifying the chain…")
            result = await widgets.call(api.verify_audit())
            verdict.clear()
            if result is FAILED:
                return
            with verdict:
                show_verdict(result)  # type: ignore[arg-type]

        await ui.context.client.connected()
        await search()
        return None


def show_verdict(result: dict[str, Any]) -> None:
    if result["ok"]:
        with ui.row().classes("items-center gap-2 text-positive").mark("chain-ok"):
            ui.icon("verified").classes("text-2xl")
            checked = widgets.number(result["checked"])
            ui.label(f"Chain intact: {checked} of your company's entries checked.")
        head = result["head_hash"]
        ui.label(f"your company's head hash {head}").classes("text-xs font-mono text-grey-7")
    else:
        with ui.row().classes("items-center gap-2 text-negative").mark("chain-broken"):
            ui.icon("gpp_bad").classes("text-2xl")
            ui.label(
                f"Chain BROKEN at entry #{result['first_bad_seq']}: {result['reason']} "
                f"({widgets.number(result['checked'])} entries checked)"
            )
