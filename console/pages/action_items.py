"""A run's proposed record changes, on its page: before and after per field, accepted or rejected one by one."""

from __future__ import annotations

import json
from typing import Any

from nicegui import ui

from backend.actions.schemas import ActionItemInfo
from backend.actions.status import ItemStatus
from console import widgets
from console.api import Api
from console.widgets import FAILED


class ActionItems(widgets.LoadedView[list[ActionItemInfo]]):
    """The proposed record changes: before/after per field, accepted or rejected one at a time."""

    text = "Loading proposed actions…"

    def __init__(self, run_id: int, container: ui.element, api: Api) -> None:
        with container:
            listing = ui.column().classes("w-full gap-3")
        super().__init__(listing, api)
        self.run_id = run_id

    async def fetch(self) -> list[ActionItemInfo]:
        return await self.api.action_items(self.run_id)

    def render(self, items: list[ActionItemInfo]) -> None:
        if not items:
            widgets.empty_state("The run proposed no changes.", "edit_off")
            return
        pending = sum(1 for i in items if i.status == ItemStatus.pending)
        ui.label(
            f"{len(items)} proposed change(s), {pending} waiting. Nothing changes until you accept an item."
        ).classes("text-grey-8")
        for item in items:
            self.item(item)

    def item(self, item: ActionItemInfo) -> None:
        status = item.status
        with ui.card().classes("w-full gap-2").props("flat bordered").mark(f"action-item action-{item.id}"):
            with ui.row().classes("items-center gap-3"):
                ui.label(f"#{item.index + 1}").classes("text-grey-7")
                ui.label(
                    f"{item.op} {item.dataset}"
                    + (f" record {item.record_id}" if item.record_id is not None else " (new record)")
                ).classes("font-medium")
                widgets.status_badge(status)
                if item.unreviewed_run:
                    ui.chip("from a run no person reviewed", icon="visibility_off", color="orange-2").mark(
                        f"unreviewed unreviewed-{item.id}"
                    )
                if item.decided_by:
                    ui.label(f"by {item.decided_by} at {widgets.when(item.decided_at)}").classes(
                        "text-xs text-grey-7"
                    )
            if item.reason:
                ui.label(f"Why: {item.reason}").classes("text-sm text-grey-8")
            changes = item.changes or {}
            before = item.before or {}
            rows = [
                {
                    "field": field,
                    "before": "—" if field not in before else _cell(before[field]),
                    "after": _cell(value),
                }
                for field, value in changes.items()
            ]
            if rows:
                ui.table(
                    rows=rows,
                    columns=[
                        {"name": "field", "label": "Field", "field": "field", "align": "left"},
                        {"name": "before", "label": "Before", "field": "before", "align": "left"},
                        {"name": "after", "label": "After", "field": "after", "align": "left"},
                    ],
                    row_key="field",
                ).props("dense flat bordered wrap-cells").classes("w-full").mark("changes-table")
            if item.created_record_id:
                ui.label(f"created record {item.created_record_id}").classes("text-sm text-positive")
            if item.raw is not None and not rows:
                ui.label("As proposed: " + json.dumps(item.raw, default=str)[:500]).classes("cr-pre w-full")
            if item.problem:
                with ui.row().classes("items-center gap-2 text-negative").mark("item-problem"):
                    ui.icon("error")
                    ui.label(str(item.problem))
            if status == ItemStatus.pending:
                with ui.row().classes("gap-2"):
                    ui.button("Accept", icon="check", on_click=lambda i=item: self.accept(i)).props(
                        "color=positive dense"
                    ).mark(f"accept-{item.id}")
                    ui.button("Reject", icon="close", on_click=lambda i=item: self.reject(i)).props(
                        "outline color=negative dense"
                    ).mark(f"reject-{item.id}")

    async def accept(self, item: ActionItemInfo) -> None:
        result = await widgets.call(self.api.accept_item(item.id))
        if result is not FAILED:
            ui.notify(f"Accepted change #{item.index + 1}.", type="positive")
        await self.load()

    async def reject(self, item: ActionItemInfo) -> None:
        result = await widgets.call(self.api.reject_item(item.id))
        if result is not FAILED:
            ui.notify(f"Rejected change #{item.index + 1}.", type="info")
        await self.load()


def _cell(value: Any) -> str:
    if value is None:
        return "(empty)"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return widgets.reveal_invisible(str(value))
