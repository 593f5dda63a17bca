"""Credits (admin): the company pool (the operator's plan and top-ups), what was used by kind - runs and the
assistant platform's chat turns side by side - per day and per person, and the costliest runs."""

from __future__ import annotations

from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.credits.schemas import CreditUsage, Forecast
from console import charts, session, theme, widgets
from console.api import Api, ApiError


def register() -> None:
    @ui.page("/credits")
    async def credits_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/credits", admin=True):
            return redirect
        api = session.api()
        with theme.frame("Credits"):
            body = ui.column().classes("w-full gap-4")
        await ui.context.client.connected()
        await widgets.load_into(body, lambda: fetch(api), render, "Loading credits…")
        return None


async def fetch(api: Api) -> CreditUsage | None:
    try:
        return await api.credits()
    except ApiError as exc:
        if exc.status == 404:  # absent, like runs, while the assistant's write ability is off
            return None
        raise


def stat(label: str, value: Any, marker: str, color: str = "text-primary", note: str = "") -> None:
    with ui.card().classes("min-w-48").mark(marker):
        ui.label(label).classes("text-grey-7 text-sm")
        ui.label(widgets.number(value)).classes(f"text-3xl font-semibold {color}")
        if note:
            ui.label(note).classes("text-grey-7 text-sm").mark(f"{marker}-note")


def render(credits: CreditUsage | None) -> None:
    if credits is None:
        widgets.empty_state(widgets.FEATURE_OFF, "block")
        return
    remaining = credits.remaining or 0
    with ui.row().classes("gap-4"):
        stat("Pool", credits.pool, "pool")
        stat("Used", credits.used, "used")
        if credits.reserved:
            stat("Held by approved runs", credits.reserved, "reserved", "text-grey-9")
        stat("Remaining", remaining, "remaining", "text-negative" if remaining <= 0 else "text-positive")
    forecast_card(credits.forecast)
    notes = []
    if credits.period_start:
        notes.append(f"since {widgets.when(credits.period_start)}")
    if credits.minimum_charge is not None:
        notes.append(f"minimum charge per run: {widgets.number(credits.minimum_charge)}")
    if credits.plan:
        plan = f"plan {credits.plan}: {widgets.number(credits.plan_credits)} a month"
        if credits.top_ups:
            plan += f", topped up by {widgets.number(credits.top_ups)} this period"
        notes.append(plan)
    for limit, what in ((credits.limit_per_person, "a person"), (credits.limit_per_day, "a day")):
        if limit:
            notes.append(f"limit {widgets.number(limit)} {what}")
    if notes:
        ui.label(" · ".join(notes)).classes("text-sm text-grey-7")
    if remaining < (credits.minimum_charge or 0) or remaining <= 0:
        widgets.error_box(
            "The pool is used up: new runs are refused until the next period starts or the operator tops it up."
        )
    by_kind = credits.usage_by_kind
    week = credits.forecast.rate_per_day_by_kind if credits.forecast else {}
    if by_kind:  # runs and chat turns side by side: this period's burn, and each kind's rate this week
        with ui.row().classes("gap-4").mark("by-kind"):
            for kind in by_kind:
                stat(
                    f"Used by {kind.label or charts.kind_label(kind.kind)}",
                    kind.credits,
                    f"kind-{kind.kind}",
                    "text-grey-9",
                    f"{widgets.number(week.get(kind.kind, 0.0))} a day this week",
                )
    with ui.row().classes("w-full gap-4 no-wrap"):
        with ui.card().classes("w-1/2"):
            ui.plotly(charts.usage_by_day(credits.usage_by_day)).classes("w-full").mark("chart-day")
        with ui.card().classes("w-1/2"):
            ui.plotly(charts.usage_by_user(credits.usage_by_user)).classes("w-full").mark("chart-user")
    with ui.card().classes("w-full").mark("costliest"):
        ui.label("Costliest runs").classes("text-lg font-medium")
        runs = credits.costliest_runs
        if not runs:
            widgets.empty_state("No runs charged yet.", "toll")
        for run in runs:
            with ui.row().classes("items-center gap-4 w-full border-b py-1"):
                ui.link(widgets.reveal_invisible(run.title or f"Run #{run.id}"), f"/runs/{run.id}").classes(
                    "grow"
                )
                ui.label(run.email).classes("text-grey-7")
                ui.label(f"{widgets.number(run.credits)} credits").classes("font-medium")
    flows = credits.costliest_flows
    if flows:  # a flow's steps are charged like runs; here they are summed per flow
        with ui.card().classes("w-full").mark("costliest-flows"):
            ui.label("Costliest flows").classes("text-lg font-medium")
            for flow in flows:
                with ui.row().classes("items-center gap-4 w-full border-b py-1").mark(f"flow-cost-{flow.id}"):
                    title = widgets.reveal_invisible(flow.title or f"Flow #{flow.id}")
                    ui.link(title, f"/flows/{flow.id}").classes("grow")
                    ui.label(flow.email).classes("text-grey-7")
                    ui.label(f"{flow.steps_charged} steps charged").classes("text-grey-7")
                    ui.label(f"{widgets.number(flow.credits)} credits").classes("font-medium")


FORECAST_COLORS = {"used_up": "text-negative", "runs_out": "text-warning", "lasts": "text-positive"}


def forecast_card(forecast: Forecast | None) -> None:
    """The backend's forecast (GET /api/credits `forecast`), said as it says it, with what the rate is."""
    if not forecast:
        return
    with ui.card().classes("w-full gap-1").mark("forecast"):
        with ui.row().classes("items-center gap-2"):
            ui.icon("trending_down", color="primary")
            ui.label("Forecast").classes("text-lg font-medium")
        ui.label(forecast.summary).classes(
            f"font-medium {FORECAST_COLORS.get(forecast.status, 'text-grey-9')}"
        ).mark(f"forecast-{forecast.status}")
        days = forecast.window_days
        ui.label(
            f"This week's rate is what was charged in the last {days} days (runs, chat turns and every other "
            f"kind), divided by {days}. What approved runs not yet finished hold counts as already spent."
        ).classes("text-sm text-grey-7").mark("forecast-definition")
