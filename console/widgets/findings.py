"""The injection warnings of a run's staged data and outputs: where, why, which tier, the part that scored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nicegui import ui

from backend.injection import reasons
from backend.injection.categories import CATEGORIES
from backend.injection.schemas import TIERS, Finding
from backend.runs.schemas import RunDetail
from backend.runs.status import RunStatus
from console.widgets.excerpt import Excerpt
from console.widgets.text import reveal_invisible, when


def location(finding: Finding) -> str:
    """Where a finding is: file › sheet › row / column of a table, or file › line of a text. The names are
    the data's own, so invisible characters in them are shown."""
    parts = [finding.path or "?"]
    if finding.sheet:
        parts.append(f"sheet {finding.sheet}")
    cell = []
    row, column = finding.row, finding.column
    if row is not None:
        if not column:
            cell.append(f"line {row}")  # a text file, scanned line by line
        else:
            cell.append("header" if row == 0 else f"row {row}")
    if column:
        cell.append(f"column {column}")
    if cell:
        parts.append(" / ".join(cell))
    return reveal_invisible(" › ".join(parts))


SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def findings_section(run: RunDetail, acknowledge: Acknowledge | None = None) -> None:
    """The injection warnings of a run's staged data, each with where, why, which tier found it, and the part
    that scored. `acknowledge` (an admin's page): each unacknowledged finding offers "Expected here…"."""
    findings = run.findings
    if not findings:
        if run.status == RunStatus.awaiting_approval:
            with ui.row().classes("items-center gap-2 text-grey-7").mark("no-warnings"):
                ui.icon("verified")
                ui.label("No text in the staged data reads like instructions to the assistant.")
        return
    acknowledged = sum(f.acknowledged is not None for f in findings)
    _warning_card(
        "warnings",
        f"{len(findings)} injection warning(s): staged data contains text that reads like "
        "instructions to the assistant. Check that the code does not follow them."
        + (f" {acknowledged} of them acknowledged by an admin as expected here." if acknowledged else ""),
        findings,
        acknowledge,
    )


def output_findings_section(run: RunDetail) -> None:
    """Instruction-like text in what the run handed back (printed output, conclusion.json, returned text
    files): the assistant is told to treat it as data, and the person sees where it is."""
    findings = run.output_findings
    if not findings:
        return
    _warning_card(
        "output-warnings",
        f"{len(findings)} warning(s) in this run's output: it carries text copied from the data that "
        "reads like instructions to the assistant. The assistant was told to treat it as data.",
        findings,
    )


# An admin's "expected here" for finding `index` of the run's findings (the page asks for the reason)
Acknowledge = Callable[[int, Finding], Awaitable[None]]
READER_LOCALE = reasons.DEFAULT_LOCALE  # the console is in English; reasons.py renders other locales' codes


def _warning_card(
    mark: str, headline: str, findings: list[Finding], acknowledge: Acknowledge | None = None
) -> None:
    """The orange card of findings, most severe first, under one headline."""
    with ui.card().classes("w-full bg-orange-1 border-l-4 border-orange gap-2").mark(mark):
        with ui.row().classes("items-center gap-2"):
            ui.icon("warning", color="warning").classes("text-2xl")
            ui.label(headline).classes("text-lg font-medium")
        ordered = sorted(enumerate(findings), key=lambda f: SEVERITY_ORDER.get(f[1].severity, 3))
        for index, finding in ordered:
            finding_row(finding, index, acknowledge)


def finding_reason(finding: Finding, locale: str = READER_LOCALE) -> str:
    """The finding's reason in the reader's language, from its codes (the English line when it has none)."""
    if finding.reason_codes:
        return reasons.render(finding.reason_codes, locale)
    return finding.reason or ""


def finding_row(finding: Finding, index: int = 0, acknowledge: Acknowledge | None = None) -> None:
    with ui.column().classes("w-full gap-1 py-1").mark("finding"):
        with ui.row().classes("items-center gap-2"):
            severity = finding.severity
            ui.badge(severity or "?", color={"high": "negative", "medium": "warning"}.get(severity, "grey"))
            ui.label(location(finding)).classes("font-medium")
            category = finding.category or ""
            with ui.label(category).classes("text-grey-7 text-sm").mark("finding-category"):
                if category in CATEGORIES:
                    ui.tooltip(CATEGORIES[category])
            tier = TIERS.get(finding.tier, "?")
            ui.label(f"found by tier {finding.tier} ({tier})").classes("text-grey-7 text-xs").mark(
                "finding-tier"
            )
            if finding.span is not None:
                ui.label(f"characters {finding.span[0]}–{finding.span[1]}").classes(
                    "text-grey-7 text-xs"
                ).mark("finding-span")
        reason = finding_reason(finding)
        if reason:
            ui.label(reason).classes("text-sm").mark("finding-reason")
        Excerpt(finding.excerpt or "", finding.span).mark("finding-excerpt")
        ack = finding.acknowledged
        if ack is not None:
            with ui.row().classes("items-center gap-2 text-positive text-sm").mark("finding-acknowledged"):
                ui.icon("task_alt")
                ui.label(f"Acknowledged as expected here by {ack.by} ({when(ack.at)}): {ack.reason}")
        elif acknowledge is not None and finding.cell_sha256:

            async def clicked(index: int = index, finding: Finding = finding) -> None:
                await acknowledge(index, finding)

            button = ui.button("Expected here…", icon="task_alt", on_click=clicked)
            button.props("flat dense size=sm").mark("acknowledge", f"acknowledge-{index}")
