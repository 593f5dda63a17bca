"""The dialog that asks a person for a reason before a decision the API records with it (a run or a flow
rejected, a finding acknowledged): the same parts and marks everywhere, so the pages and their tests meet one
dialog."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nicegui import ui

from console.widgets.loading import FAILED, call


def reason_dialog(
    title: str,
    *,
    field: str,
    button: str,
    mark: str,
    send: Callable[[str], Awaitable[Any]],
    done: str,
    after: Callable[[], Awaitable[None]],
    explain: str | None = None,
    color: str = "negative",
) -> None:
    """Open the dialog: `send(reason)` is the API call (a refusal is shown by `call`); on success `done` is
    notified and `after()` runs (the page reloads). The text area is marked `<mark>-reason`, the button
    `confirm-<mark>`."""
    with ui.dialog() as dialog, ui.card().classes("w-96"):
        ui.label(title).classes("text-lg")
        if explain:
            ui.label(explain).classes("text-sm")
        reason = ui.textarea(field).classes("w-full").mark(f"{mark}-reason")

        async def confirm() -> None:
            result = await call(send(reason.value.strip()))
            dialog.close()
            if result is not FAILED:
                ui.notify(done, type="info")
                await after()

        with ui.row().classes("justify-end w-full"):
            ui.button("Cancel", on_click=dialog.close).props("flat")
            ui.button(button, on_click=confirm).props(f"color={color}").mark(f"confirm-{mark}")
    dialog.open()
