"""The layout frame every signed-in page shares: header with the user menu, navigation by role."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from nicegui import ui

from console import session

CSS = """
.cr-code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
.cr-code table { border-collapse: collapse; width: 100%; }
.cr-code td.linenos { color: #8a8f98; text-align: right; user-select: none; padding: 0 10px 0 6px;
  border-right: 1px solid #e2e4e8; background: #f6f7f9; vertical-align: top; }
.cr-code td.code { padding-left: 10px; width: 100%; }
.cr-code td { vertical-align: top; }
.cr-code pre { margin: 0; padding: 0; line-height: 1.45 !important; font-size: 13px; font-family: inherit;
  white-space: pre; background: transparent; }
@media (max-width: 599.98px) {
  /* a phone soft-wraps the code (issue 52, D-L7): nothing sits out of sight past the right edge of the box.
     Line numbers move into each line (the table's column could not follow a wrapped line), and a wrapped
     line's continuation is indented under its text. */
  .cr-code pre { white-space: pre-wrap; overflow-wrap: anywhere; }
  .cr-code td.linenos { display: none; }
  .cr-code td.code { padding-left: 0; }
  .cr-code td.code pre { counter-reset: cr-line; }
  .cr-code td.code pre > span[id^="cr-line-"] { display: block; counter-increment: cr-line;
    padding-left: 3.2em; text-indent: -3.2em; }
  .cr-code td.code pre > span[id^="cr-line-"]::before { content: counter(cr-line); display: inline-block;
    width: 2.6em; margin-right: 0.6em; text-align: right; text-indent: 0; color: #8a8f98; user-select: none; }
}
.cr-pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px;
  white-space: pre-wrap; word-break: break-word; background: #f6f7f9; border-radius: 4px; padding: 8px; }
.cr-clickable tbody tr { cursor: pointer; }
.cr-excerpt { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre-wrap;
  word-break: break-word; background: #fff8e1; border-left: 3px solid #f59e0b; padding: 6px 8px; }
"""

MEMBER_NAV = [
    ("Runs", "/runs", "play_circle"),
    ("Flows", "/flows", "account_tree"),
    ("Drive", "/drive", "folder"),
    ("Import data", "/datasets/import", "upload_file"),  # into a dataset they may edit (issue 54)
    ("Assistant access", "/access", "smart_toy"),
]
AUDITOR_NAV = [  # reads the trail and every run and flow; decides nothing (no settings, credits, tokens)
    ("Runs", "/runs", "play_circle"),
    ("Flows", "/flows", "account_tree"),
    ("Drive", "/drive", "folder"),
    ("Audit", "/audit", "fact_check"),
    ("People", "/people", "group"),
    ("Teams and permissions", "/teams", "lock_person"),
]
ADMIN_NAV = [
    ("Runs", "/runs", "play_circle"),
    ("Flows", "/flows", "account_tree"),
    ("Drive", "/drive", "folder"),
    ("Datasets", "/datasets", "table_chart"),
    ("People", "/people", "group"),
    ("Teams and permissions", "/teams", "lock_person"),
    ("Settings", "/settings", "tune"),
    ("Single sign-on", "/sso-settings", "vpn_key"),
    ("Credits", "/credits", "toll"),
    ("Audit", "/audit", "fact_check"),
    ("Health", "/health", "monitor_heart"),
    ("Assistant access", "/access", "smart_toy"),
]


# Quasar's drawer breakpoint is 1023 px: from "md" (1024 px) up the drawer stands beside the page
DRAWER_BREAKPOINT = "md"


def colors() -> None:
    ui.colors(primary="#1f4e79", secondary="#5b7083", accent="#0f766e")


@contextmanager
def frame(title: str) -> Iterator[None]:
    me = session.me()
    ui.page_title(f"{title} · Cleanroom")
    colors()
    drawer: ui.left_drawer | None = None
    with ui.header(elevated=True).classes("items-center justify-between no-wrap bg-primary px-4 py-2"):
        with ui.row().classes("items-center no-wrap gap-3 min-w-0"):
            # below the drawer's breakpoint the drawer starts closed (the page comes first); this opens it
            ui.button(icon="menu", on_click=lambda: drawer and drawer.toggle()).props(
                "flat round dense color=white aria-label=Navigation"
            ).classes(f"cr-nav-toggle lt-{DRAWER_BREAKPOINT}").mark("nav-toggle")
            ui.icon("shield").classes("text-2xl")
            ui.link("Cleanroom", "/runs").classes("text-lg font-semibold text-white no-underline")
            ui.label(me.company.name if me else "").classes("text-sm opacity-80 gt-xs")
        with ui.button(icon="account_circle").props("flat color=white no-caps").mark("user-menu"):
            ui.label((me.name or me.email) if me else "").classes("ml-1 gt-xs")
            with ui.menu():
                with ui.column().classes("px-4 py-2 gap-0"):
                    ui.label(me.email if me else "").classes("font-medium")
                    ui.label(f"role: {me.role if me else '?'}").classes("text-xs text-grey-7")
                    ui.link("Your account (password)", "/account").classes("text-sm").mark("account")
                ui.separator()
                ui.menu_item("Sign out", on_click=session.end_session).mark("sign-out")  # a POST, never a GET
    # value=None: Quasar opens the drawer beside the page at desktop width and keeps it closed (an overlay
    # opened from the header's menu button) below its breakpoint, so on a phone the page is what shows first
    drawer = ui.left_drawer(value=None, bordered=True).props("width=200").classes("cr-nav bg-grey-1 px-0")
    with drawer.mark("nav-drawer"):
        nav = {"admin": ADMIN_NAV, "auditor": AUDITOR_NAV}.get(session.role() or "", MEMBER_NAV)
        for label, path, icon in nav:
            marker = "nav-" + label.lower().replace(" ", "-")  # one marker per entry ("nav-assistant-access")
            link = ui.link(target=path).classes("w-full no-underline text-grey-9").mark(marker)
            with link, ui.row().classes("items-center gap-3 px-4 py-2 hover:bg-grey-3 w-full"):
                ui.icon(icon).classes("text-primary")
                ui.label(label)
    with (
        ui.column()
        .classes("cr-page w-full max-w-screen-xl mx-auto p-2 sm:p-4 gap-4 min-w-0")
        .mark("page-content")
    ):
        ui.label(title).classes("text-2xl font-semibold").mark("page-title")
        yield
