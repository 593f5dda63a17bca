"""Run history: every run the caller may see, filterable by user, status, date and dataset."""

from __future__ import annotations

from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.runs.schemas import RunPage, RunStats, RunSummary
from backend.runs.status import RunStatus
from console import charts, session, theme, widgets
from console.api import ApiError

COLUMNS = [
    {"name": "id", "label": "#", "field": "id", "align": "right", "sortable": True},
    {"name": "title", "label": "Title", "field": "title", "align": "left"},
    {"name": "flow", "label": "Flow", "field": "flow", "align": "left"},
    {"name": "status", "label": "Status", "field": "status", "align": "left", "sortable": True},
    {
        "name": "requested_by",
        "label": "Requested by",
        "field": "requested_by",
        "align": "left",
        "sortable": True,
    },
    {"name": "datasets", "label": "Inputs", "field": "datasets", "align": "left"},
    {"name": "created_at", "label": "Proposed", "field": "created_at", "align": "left", "sortable": True},
    {"name": "warnings", "label": "Warnings", "field": "warnings", "align": "right"},
    {"name": "credits", "label": "Credits", "field": "credits", "align": "right"},
]

TITLE_SLOT = r"""
<q-td :props="props"><a :href="'/runs/' + props.row.id" class="text-primary">{{ props.value }}</a></q-td>
"""
# a step of a flow links to its flow; .stop keeps the row's own click (to the run) from also firing
FLOW_SLOT = r"""
<q-td :props="props">
  <a v-if="props.row.flow_id" :href="'/flows/' + props.row.flow_id" class="text-primary" @click.stop>{{ props.value }}</a>
</q-td>
"""
STATUS_SLOT = r"""
<q-td :props="props"><q-badge :color="props.row.status_color">{{ props.value }}</q-badge></q-td>
"""


def flow_step(run: RunSummary) -> str:
    """ "flow N · step k" for a step of a flow, else ""."""
    return f"flow {run.flow_id} · step {run.flow_step}" if run.flow_id else ""


def waiting_links(waiting: list[RunSummary]) -> dict[str, str]:
    """Where the waiting runs are decided, page → link text: a run on its own page, the steps of a flow
    together on their flow's (one link per flow)."""
    links: dict[str, str] = {}
    for run in waiting:
        if run.flow_id:
            links.setdefault(f"/flows/{run.flow_id}", f"flow {run.flow_id}")
        else:
            links[f"/runs/{run.id}"] = widgets.run_title(run)
    return links


def table_rows(items: list[RunSummary]) -> list[dict[str, Any]]:
    """The runs as the table's rows (dicts the table shows, not the API's JSON)."""
    rows = []
    for run in items:
        inputs = list(run.datasets)
        if run.file_ids:
            inputs.append(f"{len(run.file_ids)} file(s)")
        rows.append(
            {
                "id": run.id,
                "title": widgets.run_title(run),
                "flow": flow_step(run),
                "flow_id": run.flow_id,
                "status": run.status.replace("_", " "),
                "status_color": widgets.STATUS_COLORS.get(run.status, "grey"),
                "requested_by": run.requested_by.email,
                "datasets": ", ".join(inputs),
                "created_at": widgets.when(run.created_at),
                "warnings": run.findings_count or "",
                "credits": widgets.number(run.credits_charged) if run.credits_charged else "",
            }
        )
    return rows


def register() -> None:
    @ui.page("/runs")
    async def runs_page(status: str | None = None) -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/runs"):
            return redirect
        me = session.me()
        api = session.api()
        admin = session.sees_company_history()  # an admin's or an auditor's view: every run of the company
        with theme.frame("Runs" if admin else "My runs"):
            with ui.row().classes("items-end gap-3 w-full").mark("filters"):
                user = None
                if admin:
                    user = (
                        ui.input("User email")
                        .props("dense outlined clearable")
                        .classes("w-56")
                        .mark("f-user")
                    )
                status_select = (
                    ui.select(
                        {"": "any status", **{s: s.replace("_", " ") for s in widgets.RUN_STATUSES}},
                        value=status if status in widgets.RUN_STATUSES else "",
                        label="Status",
                    )
                    .props("dense outlined")
                    .classes("w-48")
                    .mark("f-status")
                )
                datasets = sorted(me.permissions) if me else []
                dataset = (
                    ui.select({"": "any dataset", **{d: d for d in datasets}}, value="", label="Dataset")
                    .props("dense outlined")
                    .classes("w-48")
                    .mark("f-dataset")
                )
                since = (
                    ui.input("From (YYYY-MM-DD)")
                    .props("dense outlined clearable")
                    .classes("w-40")
                    .mark("f-since")
                )
                until = (
                    ui.input("Until (YYYY-MM-DD)")
                    .props("dense outlined clearable")
                    .classes("w-40")
                    .mark("f-until")
                )
                ui.button("Apply", icon="filter_alt", on_click=lambda: reload()).mark("apply-filters")
            figures = ui.row().classes("w-full gap-4 flex-wrap").mark("run-charts")
            results = ui.column().classes("w-full")

        async def fetch_stats() -> RunStats | None:
            """The charts' figures, over the same runs as the list (the API's rule); None while runs are off."""
            try:
                return await api.run_stats()
            except ApiError as exc:
                if exc.status == 404:
                    return None
                raise

        async def fetch() -> RunPage | None:
            """None: the whole feature is absent while assistant writes are off (the API answers 404)."""
            try:
                return await list_runs()
            except ApiError as exc:
                if exc.status == 404:
                    return None
                raise

        async def list_runs() -> RunPage:
            return await api.runs(
                user=(user.value or "").strip() if user else None,
                status=status_select.value or None,
                dataset=dataset.value or None,
                since=f"{since.value}T00:00:00+00:00" if since.value else None,
                until=f"{until.value}T23:59:59+00:00" if until.value else None,
                limit=200,
            )

        def render(body: RunPage | None) -> None:
            if body is None:
                widgets.empty_state(widgets.FEATURE_OFF, "block")
                return
            items = body.items
            if not items:
                widgets.empty_state(
                    "No runs match these filters."
                    if any(x for x in (status_select.value, dataset.value, since.value, until.value))
                    else "No runs yet. Runs appear here when the assistant proposes one.",
                    "play_disabled",
                )
                return
            waiting = [r for r in items if r.status == RunStatus.awaiting_approval]
            if waiting and not status_select.value:
                with (
                    ui.row()
                    .classes("items-center gap-2 bg-orange-1 rounded px-3 py-2 w-full")
                    .mark("waiting")
                ):
                    ui.icon("pending_actions", color="warning")
                    ui.label(f"{len(waiting)} run(s) wait for approval:")
                    for target, text in list(waiting_links(waiting).items())[:5]:
                        ui.link(text, target)
            ui.label(f"{body.total} run(s)").classes("text-grey-7 text-sm").mark("run-count")
            table = ui.table(rows=table_rows(items), columns=COLUMNS, row_key="id", pagination=25)
            table.props("flat bordered wrap-cells").classes("w-full").mark("runs-table")
            table.add_slot("body-cell-title", TITLE_SLOT)
            table.add_slot("body-cell-flow", FLOW_SLOT)
            table.add_slot("body-cell-status", STATUS_SLOT)
            table.classes("cr-clickable")
            table.on("rowClick", lambda e: ui.navigate.to(f"/runs/{e.args[1]['id']}"))

        async def reload() -> None:
            await widgets.load_into(results, fetch, render, "Loading runs…")

        await ui.context.client.connected()
        await reload()
        await widgets.load_into(figures, fetch_stats, render_charts, "Drawing the charts…")
        return None


def render_charts(stats: RunStats | None) -> None:
    """Runs per day by status and the median VM start and duration per day, side by side."""
    if stats is None or not (stats.runs_per_day or stats.timings_per_day):
        return
    ui.plotly(charts.runs_per_day(stats)).classes("flex-1 min-w-[320px]").mark("chart-runs-per-day")
    ui.plotly(charts.run_timings(stats)).classes("flex-1 min-w-[320px]").mark("chart-run-timings")
