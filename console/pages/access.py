"""Assistant access (every signed-in person): the two ways an assistant connects to Cleanroom over MCP, and what is
connected. A hosted assistant's connector uses OAuth (the connector URL; the person allows it on the consent page,
console/pages/connect.py, and it is listed here under "Connected assistants", where it is disconnected); any other
client uses a personal API token as a bearer header (or the desktop's stdio configuration).

A token is created, listed and revoked with the person's session (`/api/me/tokens`, person-only endpoints).
Its secret is in the creation answer only: this page shows it once, in this browser tab, with the two
configurations filled in, and keeps it nowhere else (not in the per-browser storage, not in a log). Reloading
the page, or "I have copied it", puts a placeholder back.
"""

from __future__ import annotations

import json

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.tenancy.schemas import ApiToken, Connection, NewApiToken
from console import session, theme, widgets
from console.api import Api
from console.widgets import FAILED

TOKEN_PLACEHOLDER = "<your API token>"
NAME_MAX = 100

SCOPE_EXPLAINED = (
    "A personal API token lets an assistant (Claude, ChatGPT, Cursor, an IDE agent) work with Cleanroom as you, "
    "with the assistant scope: it can read the data you may read, upload to Drive, and propose runs. It cannot "
    "approve or reject a run, accept a proposed change, manage tokens or change settings: you do that here, and "
    "every run it proposes waits for your approval."
)
SHOWN_ONCE = (
    "Copy it now: this is the only time it is shown. Cleanroom keeps only a hash of it, so once you leave or "
    "reload this page it cannot be shown again (create a new one if you lose it)."
)
DESKTOP_HINT = (
    "For an assistant on your computer that starts its tools itself (e.g. Claude Desktop's "
    "claude_desktop_config.json, Cursor's mcp.json). It runs “cleanroom mcp”, which needs the Cleanroom package "
    "installed on that computer; give the full path to “cleanroom” if it is not on the assistant's PATH."
)
OAUTH_HINT = (
    "For a hosted assistant that connects with OAuth (e.g. a custom connector in Claude or ChatGPT): give it this "
    "URL and nothing else. It registers itself and sends you to a Cleanroom page where you see which assistant "
    "asks and allow it (the same assistant scope as a token: it proposes, you decide). It appears under "
    "“Connected assistants” below, where you can disconnect it; its access renews itself hourly until you do."
)
REMOTE_HINT = (
    "For an assistant that connects to a server over HTTP (streamable HTTP, the token as a bearer header)."
)
CLAUDE_CODE_HINT = "Or, in Claude Code:"

COLUMNS = [  # (header, width classes) of the token list
    ("Name", "w-1/4 min-w-32 break-words"),
    ("Prefix", "w-28"),
    ("Created", "w-40"),
    ("Last used", "w-40"),
    ("Status", "w-20"),
    ("", "w-24 text-right"),
]


def urls() -> tuple[str, str]:
    """The API's and the console's addresses as people reach them (what an assistant must be given)."""
    from backend.settings import get_settings

    settings = get_settings()
    return settings.effective_public_url.rstrip("/"), settings.effective_console_url.rstrip("/")


def desktop_config(api_url: str, console_url: str, token: str) -> str:
    server = {
        "command": "cleanroom",
        "args": ["mcp", "--api", api_url, "--console", console_url],
        "env": {"CLEANROOM_TOKEN": token},
    }
    return json.dumps({"mcpServers": {"cleanroom": server}}, indent=2)


def remote_config(api_url: str, token: str) -> str:
    server = {"type": "http", "url": f"{api_url}/mcp", "headers": {"Authorization": f"Bearer {token}"}}
    return json.dumps({"mcpServers": {"cleanroom": server}}, indent=2)


def claude_code_command(api_url: str, token: str) -> str:
    return f'claude mcp add --transport http cleanroom {api_url}/mcp --header "Authorization: Bearer {token}"'


COPY_JS = """
if (!navigator.clipboard || !window.isSecureContext) return false;
try { await navigator.clipboard.writeText(%s); return true; } catch (e) { return false; }
"""


async def copy(text: str, what: str) -> None:
    """Write to the browser's clipboard and say whether it worked (browsers allow it over https or localhost)."""
    try:
        done = await ui.run_javascript(COPY_JS % json.dumps(text), timeout=3.0)
    except TimeoutError:
        done = False
    if done:
        ui.notify(f"{what} copied to the clipboard.", type="positive")
    else:
        ui.notify(
            "The browser did not allow copying (it does only over https or on localhost): select the text and "
            "copy it yourself.",
            type="warning",
            multi_line=True,
        )


def snippet(title: str, hint: str, text: str, marker: str, what: str) -> None:
    with ui.column().classes("w-full gap-1").mark(marker):
        with ui.row().classes("items-center justify-between w-full no-wrap"):
            ui.label(title or hint).classes("font-medium" if title else "text-sm text-grey-7")
            ui.button("Copy", icon="content_copy", on_click=lambda: copy(text, what)).props(
                "flat dense no-caps"
            ).mark(f"{marker}-copy")
        if title and hint:
            ui.label(hint).classes("text-sm text-grey-7")
        ui.label(text).classes("cr-pre w-full select-all").mark(f"{marker}-text")


def register() -> None:
    @ui.page("/access")
    async def access_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/access"):
            return redirect
        api = session.api()
        with theme.frame("Assistant access"):
            ui.label(SCOPE_EXPLAINED).classes("text-grey-8 max-w-screen-md")
            page = AccessPage(api)
        await ui.context.client.connected()
        await page.load_tokens()
        await page.load_connections()
        return None


class AccessPage:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.created: NewApiToken | None = None  # this tab's new token, until hidden (never stored)
        with ui.card().classes("w-full gap-2").mark("create-token"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("key", color="primary")
                ui.label("Create a token").classes("text-lg font-medium")
            ui.label(
                "One token per assistant or device, named so you recognise it later: you can then revoke one "
                "without disconnecting the others."
            ).classes("text-sm text-grey-7")
            with ui.row().classes("items-start gap-3 w-full"):
                self.name = (
                    ui.input(
                        "Token name",
                        placeholder="e.g. Claude Desktop on my laptop",
                        validation={f"At most {NAME_MAX} characters": lambda v: len(v or "") <= NAME_MAX},
                    )
                    .props("outlined dense")
                    .classes("w-96")
                    .mark("token-name")
                )
                self.create_button = (
                    ui.button("Create token", icon="add", on_click=self.create)
                    .props("no-caps")
                    .mark("create-token-button")
                )
                self.name.on("keydown.enter", self.create)
            self.new_token = ui.column().classes("w-full gap-2")
        with ui.card().classes("w-full gap-3").mark("connect"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("hub", color="primary")
                ui.label("Connect an assistant (MCP)").classes("text-lg font-medium")
            snippet(
                "Hosted assistant (OAuth connector URL)",
                OAUTH_HINT,
                f"{urls()[0]}/mcp",
                "config-oauth",
                "Connector URL",
            )
            ui.label(
                "Or with a personal API token, for an assistant that sends a header or runs on your computer:"
            ).classes("font-medium")
            self.configs = ui.column().classes("w-full gap-4")
        with ui.card().classes("w-full gap-2").mark("tokens"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("list", color="primary")
                ui.label("Your tokens").classes("text-lg font-medium")
            self.tokens = ui.column().classes("w-full gap-0")
        with ui.card().classes("w-full gap-2").mark("connections"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("hub", color="primary")
                ui.label("Connected assistants (OAuth)").classes("text-lg font-medium")
            self.connections = ui.column().classes("w-full gap-0")
        self.render_created()

    # the token shown once, and the configurations
    def render_created(self) -> None:
        self.new_token.clear()
        created = self.created
        if created:
            with (
                self.new_token,
                ui.card().classes("w-full gap-2 bg-green-1 border-l-4 border-positive").mark("new-token"),
            ):
                with ui.row().classes("items-center gap-2"):
                    ui.icon("check_circle", color="positive")
                    ui.label(f"Token “{created.name}” created").classes("font-medium")
                ui.label(SHOWN_ONCE).classes("text-sm")
                with ui.row().classes("items-center gap-2 w-full no-wrap"):
                    ui.label(created.token).classes("cr-pre grow select-all").mark("new-token-value")
                    ui.button(
                        "Copy", icon="content_copy", on_click=lambda: copy(created.token, "Token")
                    ).props("flat dense no-caps").mark("new-token-copy")
                ui.button(
                    "I have copied it: hide the token", icon="visibility_off", on_click=self.hide
                ).props("flat dense no-caps").mark("hide-token")
        self.render_configs()

    def render_configs(self) -> None:
        api_url, console_url = urls()
        token = self.created.token if self.created else TOKEN_PLACEHOLDER
        self.configs.clear()
        with self.configs:
            if self.created:
                with ui.row().classes("items-center gap-2 text-positive").mark("configs-filled"):
                    ui.icon("task_alt")
                    ui.label(
                        f"Filled in with your new token “{self.created.name}”: copy what you need before you "
                        "leave this page."
                    )
            else:
                with ui.row().classes("items-center gap-2 text-grey-8").mark("configs-placeholder"):
                    ui.icon("info")
                    ui.label(
                        f"Replace {TOKEN_PLACEHOLDER} with a token. A token is shown only when it is created: "
                        "create one above and these are filled in with it."
                    )
            snippet(
                "Desktop assistant (stdio)",
                DESKTOP_HINT,
                desktop_config(api_url, console_url, token),
                "config-desktop",
                "Desktop configuration",
            )
            snippet(
                "Remote assistant (streamable HTTP)",
                REMOTE_HINT,
                remote_config(api_url, token),
                "config-remote",
                "Remote configuration",
            )
            snippet(
                "", CLAUDE_CODE_HINT, claude_code_command(api_url, token), "config-claude-code", "Command"
            )
            ui.label(
                f"Server address: {api_url}/mcp. Approval links the assistant gives you open {console_url}."
            ).classes("text-sm text-grey-7")

    def hide(self) -> None:
        self.created = None
        self.render_created()

    async def create(self) -> None:
        name = (self.name.value or "").strip()
        if not name:
            ui.notify("Give the token a name, e.g. the assistant and the device it runs on.", type="warning")
            return
        if len(name) > NAME_MAX:
            ui.notify(f"A token name has at most {NAME_MAX} characters.", type="warning")
            return
        self.create_button.disable()
        try:
            result = await widgets.call(self.api.create_token(name))
        finally:
            self.create_button.enable()
        if result is FAILED:
            return
        self.created = result  # type: ignore[assignment]
        self.name.value = ""
        self.render_created()
        ui.notify(f"Token “{name}” created. Copy it now: it is shown only once.", type="positive")
        await self.load_tokens()

    # the list
    async def load_tokens(self) -> None:
        await widgets.load_into(self.tokens, self.api.tokens, self.render_tokens, "Loading your tokens…")

    def render_tokens(self, tokens: list[ApiToken]) -> None:
        if not tokens:
            widgets.empty_state(
                "No tokens yet. Create one above to connect an assistant; until then, no assistant can act "
                "for you.",
                "key_off",
            )
            return
        tokens = sorted(tokens, key=lambda t: t.created_at, reverse=True)
        tokens = sorted(tokens, key=lambda t: t.revoked)  # active first, newest first within
        header = "w-full gap-4 py-1 text-xs uppercase text-grey-7 border-b no-wrap"
        with ui.row().classes(header).mark("tokens-header"):
            for label, width in COLUMNS:
                ui.label(label).classes(width)
        for token in tokens:
            self.render_token(token)

    def render_token(self, token: ApiToken) -> None:
        revoked = token.revoked
        row = ui.row().classes(
            "w-full gap-4 py-2 border-b items-center no-wrap" + (" text-grey-6" if revoked else "")
        )
        with row.mark(f"token token-{token.id}"):
            ui.label(token.name or "—").classes(COLUMNS[0][1] + " font-medium").mark(f"token-name-{token.id}")
            ui.label(f"{token.prefix}…").classes(COLUMNS[1][1] + " cr-code").mark(f"token-prefix-{token.id}")
            ui.label(widgets.when(token.created_at)).classes(COLUMNS[2][1]).mark(f"token-created-{token.id}")
            last = token.last_used_at
            ui.label(widgets.when(last) if last else "Never").classes(COLUMNS[3][1]).mark(
                f"token-last-used-{token.id}"
            )
            with ui.element("div").classes(COLUMNS[4][1]):
                ui.badge("revoked" if revoked else "active", color="grey" if revoked else "positive").mark(
                    f"token-status-{token.id}"
                )
            with ui.element("div").classes(COLUMNS[5][1]):
                if not revoked:
                    ui.button("Revoke", icon="block", on_click=lambda t=token: self.confirm_revoke(t)).props(
                        "flat dense no-caps color=negative"
                    ).mark(f"revoke-{token.id}")

    def confirm_revoke(self, token: ApiToken) -> None:
        with ui.dialog() as dialog, ui.card().classes("gap-3").mark("revoke-dialog"):
            ui.label(f"Revoke the token “{token.name}” ({token.prefix}…)?").classes("font-medium")
            ui.label(
                "Any assistant using it is refused from its next request on. This cannot be undone; to "
                "reconnect that assistant, create a new token."
            ).classes("text-sm text-grey-8")
            with ui.row().classes("justify-end w-full"):
                ui.button("Cancel", on_click=dialog.close).props("flat no-caps").mark("cancel-revoke")

                async def confirm() -> None:
                    dialog.close()
                    await self.revoke(token)

                ui.button("Revoke", icon="block", on_click=confirm).props("color=negative no-caps").mark(
                    "confirm-revoke"
                )
        dialog.open()

    async def revoke(self, token: ApiToken) -> None:
        result = await widgets.call(self.api.revoke_token(token.id))
        if result is not FAILED:
            ui.notify(
                f"Token “{token.name}” revoked: assistants using it are refused from now on.",
                type="positive",
            )
            if self.created and self.created.id == token.id:
                self.hide()  # its configurations would no longer work
        await self.load_tokens()

    # assistants connected by OAuth (one grant each)
    async def load_connections(self) -> None:
        await widgets.load_into(
            self.connections,
            self.api.connections,
            self.render_connections,
            "Loading your connected assistants…",
        )

    def render_connections(self, connections: list[Connection]) -> None:
        if not connections:
            widgets.empty_state(
                "No assistant is connected by OAuth. Give a hosted assistant the connector URL above to connect one.",
                "link_off",
            )
            return
        connections = sorted(connections, key=lambda c: c.revoked)  # active first, newest first within
        for connection in connections:
            self.render_connection(connection)

    def render_connection(self, connection: Connection) -> None:
        revoked = connection.revoked
        row = ui.row().classes(
            "w-full gap-4 py-2 border-b items-center no-wrap" + (" text-grey-6" if revoked else "")
        )
        with row.mark(f"connection connection-{connection.id}"):
            with ui.column().classes("w-1/3 gap-0"):
                ui.label(connection.client_name or "An assistant with no name").classes("font-medium").mark(
                    f"connection-name-{connection.id}"
                )
                ui.label(connection.redirect_uri).classes("text-xs text-grey-7 break-all")
            ui.label(f"connected {widgets.when(connection.created_at)}").classes("w-40 text-sm")
            last = connection.last_used_at
            ui.label(f"last used {widgets.when(last)}" if last else "never used").classes("w-40 text-sm")
            with ui.element("div").classes("w-24"):
                ui.badge("revoked" if revoked else "active", color="grey" if revoked else "positive").mark(
                    f"connection-status-{connection.id}"
                )
            with ui.element("div").classes("w-28 text-right"):
                if not revoked:
                    ui.button(
                        "Disconnect",
                        icon="link_off",
                        on_click=lambda c=connection: self.confirm_disconnect(c),
                    ).props("flat dense no-caps color=negative").mark(f"disconnect-{connection.id}")

    def confirm_disconnect(self, connection: Connection) -> None:
        name = connection.client_name or "this assistant"
        with ui.dialog() as dialog, ui.card().classes("gap-3").mark("disconnect-dialog"):
            ui.label(f"Disconnect “{name}”?").classes("font-medium")
            ui.label(
                "Its access and refresh tokens are refused from their next use. To reconnect it, connect it again "
                "from the assistant (you will be asked again)."
            ).classes("text-sm text-grey-8")
            with ui.row().classes("justify-end w-full"):
                ui.button("Cancel", on_click=dialog.close).props("flat no-caps")

                async def confirm() -> None:
                    dialog.close()
                    result = await widgets.call(self.api.revoke_connection(connection.id))
                    if result is not FAILED:
                        ui.notify(f"“{name}” disconnected.", type="positive")
                    await self.load_connections()

                ui.button("Disconnect", icon="link_off", on_click=confirm).props(
                    "color=negative no-caps"
                ).mark("confirm-disconnect")
        dialog.open()
