"""A run's re-runs for evidence, on its page: start one, and see whether each matched the original."""

from __future__ import annotations

from typing import Any

from nicegui import ui

from backend.evidence.schemas import Rerun, RerunOutcome
from backend.evidence.schemas import Reruns as RerunOverview
from backend.evidence.status import IN_FLIGHT as RERUN_IN_FLIGHT
from console import widgets
from console.api import Api
from console.widgets import FAILED

RERUN_EXPLAINED = (
    "Runs the exact approved code over the exact staged bundle again, in a fresh VM with no network, while the "
    "company keeps the bundle (Settings › Data retention). Its proposed changes are discarded unread, nothing is "
    "filed and no credits are charged. Code that uses the time, random numbers or os.urandom prints and writes "
    "something else each time: a mismatch there is expected."
)


def yes_no(value: Any) -> str:
    return "yes" if value else "no"


class Reruns(widgets.LoadedView[RerunOverview]):
    """A company admin or an auditor re-runs a kept run and sees whether its printed output and each output
    file's sha256 match the original's."""

    text = "Loading re-runs…"

    def __init__(self, run_id: int, container: ui.element, api: Api) -> None:
        with container:
            ui.label(RERUN_EXPLAINED).classes("text-sm text-grey-7")
            listing = ui.column().classes("w-full gap-3")
        super().__init__(listing, api)
        self.run_id = run_id
        with container:
            ui.timer(3.0, self.poll)  # beside the list, so reloading the list never deletes it

    async def fetch(self) -> RerunOverview:
        return await self.api.reruns(self.run_id)

    def moving(self, overview: RerunOverview) -> bool:
        """While a re-run is queued or running, reload until it ends."""
        return any(i.status in RERUN_IN_FLIGHT for i in overview.items)

    def render(self, overview: RerunOverview) -> None:
        with ui.row().classes("items-center gap-3"):
            button = ui.button("Re-run for evidence", icon="replay", on_click=lambda: self.start(button))
            button.props("outline").mark("rerun")
            if overview.available:
                ui.label(f"bundle kept until {widgets.when(overview.kept_until)} UTC").classes(
                    "text-sm text-grey-8"
                ).mark("rerun-kept-until")
            else:
                button.disable()
                with ui.row().classes("items-center gap-1 text-grey-8").mark("rerun-unavailable"):
                    ui.icon("lock")
                    ui.label(str(overview.unavailable_reason or "not available"))
            if self.moving(overview):
                ui.button("Refresh", icon="refresh", on_click=self.load).props("flat dense").mark(
                    "rerun-refresh"
                )
        for item in overview.items:
            self.item(item)

    def item(self, item: Rerun) -> None:
        with ui.card().classes("w-full gap-2").props("flat bordered").mark(f"rerun rerun-{item.id}"):
            with ui.row().classes("items-center gap-3"):
                ui.label(f"Re-run #{item.id}").classes("font-medium")
                widgets.status_badge(item.status)
                ui.label(
                    f"asked by {item.requested_by} at {widgets.when(item.requested_at)} · not charged"
                ).classes("text-xs text-grey-7")
            if item.error_message:
                widgets.error_box(str(item.error_message))
            comparison = item.comparison
            if not comparison:
                return
            outcome = RerunOutcome.of(item.outcome)
            ok = comparison.all_match
            with ui.row().classes("items-center gap-2 " + ("text-positive" if ok else "text-warning")):
                ui.icon("verified" if ok else "difference")
                ui.label(
                    "Everything matched the original run."
                    if ok
                    else "Not everything matched the original run (see below)."
                ).mark("rerun-verdict")
            with ui.grid(columns=2).classes("gap-x-6 gap-y-1 text-sm"):
                ui.label("printed output matches")
                ui.label(yes_no(comparison.printed_output_match)).mark("rerun-printed-match")
                ui.label("status and exit code match")
                ui.label(yes_no(comparison.status_match and comparison.exit_code_match)).mark(
                    "rerun-status-match"
                )
                ui.label("its proposed changes")
                ui.label("discarded unread" if outcome.actions_discarded else "none written")
                ui.label("network interfaces in the VM definition")
                vm = outcome.vm
                ui.label(str(vm.nics if vm and "nics" in vm.model_fields_set else "?"))
            rows = [
                {
                    "name": widgets.reveal_invisible(f.name),
                    "original": (f.original_sha256 or "— (not written)")[:16],
                    "rerun": (f.rerun_sha256 or "— (not written)")[:16],
                    "match": yes_no(f.match),
                }
                for f in comparison.files
            ]
            if rows:
                ui.table(
                    rows=rows,
                    columns=[
                        {"name": "name", "label": "Output file", "field": "name", "align": "left"},
                        {
                            "name": "original",
                            "label": "Original sha256",
                            "field": "original",
                            "align": "left",
                        },
                        {"name": "rerun", "label": "Re-run sha256", "field": "rerun", "align": "left"},
                        {"name": "match", "label": "Match", "field": "match", "align": "left"},
                    ],
                    row_key="name",
                ).props("dense flat bordered").classes("w-full").mark("rerun-files")

    async def start(self, button: ui.button) -> None:
        button.disable()
        result = await widgets.call(self.api.request_rerun(self.run_id))
        if result is not FAILED:
            ui.notify("Re-run queued: it runs in a fresh VM; refresh to see the comparison.", type="positive")
        await self.load()
