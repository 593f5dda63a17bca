"""Text as the pages show it: invisible characters revealed, titles, sizes, times, numbers, and a titled card."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from nicegui import ui

from backend.injection.text import render_visible
from backend.runs.schemas import RunDetail, RunSummary


def reveal_invisible(text: str) -> str:
    """Invisible characters shown as <U+…>: the backend's definition (the scanner's), the only one."""
    return render_visible(text)


def run_title(run: RunSummary | RunDetail) -> str:
    """A run's title as the console shows it: bidi overrides and invisible characters revealed, since the
    title is the assistant's text and a reversed or hidden part could make one run pass for another."""
    return reveal_invisible(run.title or f"Run #{run.id}")


def pre(text: str) -> ui.label:
    return ui.label(text).classes("cr-pre w-full")


def human_bytes(size: int | float | None) -> str:
    if size is None:
        return "—"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def when(value: datetime | str | None) -> str:
    if not value:
        return "—"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def section(title: str, icon: str, marker: str | None = None) -> ui.card:
    card = ui.card().classes("w-full gap-2")
    if marker:
        card.mark(marker)
    with card, ui.row().classes("items-center gap-2"):
        ui.icon(icon, color="primary")
        ui.label(title).classes("text-lg font-medium")
    return card
