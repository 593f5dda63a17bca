"""Small UI pieces the pages share: loading, readable errors, status badges, code, sizes and times; and the
parts of a run a person reviews or reads back (its staged data, code, warnings, printed output and files),
shown alike on a run's page and on each step of a flow."""

from __future__ import annotations

import ast
import base64
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from nicegui import ui
from nicegui.elements.mixins.text_element import TextElement
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

from backend.actions.status import ItemStatus
from backend.audit.schemas import AuditEntryInfo
from backend.drive.schemas import DriveFileInfo
from backend.injection import reasons
from backend.injection.categories import CATEGORIES
from backend.injection.schemas import TIERS, Finding
from backend.injection.text import render_visible
from backend.runs.schemas import RunDetail, RunResult, RunSummary
from backend.runs.status import RunStatus
from backend.schedules.status import ScheduleStatus
from backend.staging.manifest import Manifest
from console import session
from console.api import Api, ApiError

T = TypeVar("T")

STATUS_COLORS: dict[str, str] = {
    RunStatus.awaiting_approval: "orange",
    RunStatus.queued: "blue-grey",
    RunStatus.running: "blue",
    RunStatus.succeeded: "positive",
    RunStatus.failed: "negative",
    RunStatus.timed_out: "negative",
    RunStatus.out_of_memory: "negative",
    RunStatus.error: "negative",
    RunStatus.cancelled: "grey",
    RunStatus.rejected: "grey",
    ItemStatus.pending: "orange",
    ItemStatus.accepted: "positive",
    ItemStatus.invalid: "negative",
    ItemStatus.conflict: "negative",
    ScheduleStatus.active: "positive",
    ScheduleStatus.paused: "grey",
    RunStatus.waiting: "blue-grey-4",  # a flow's step, approved, behind the steps before it
    RunStatus.skipped: "grey",  # a flow's step that never ran: an earlier step did not succeed
}
RUN_STATUSES = [
    RunStatus.awaiting_approval,
    RunStatus.waiting,
    RunStatus.queued,
    RunStatus.running,
    RunStatus.succeeded,
    RunStatus.failed,
    RunStatus.timed_out,
    RunStatus.out_of_memory,
    RunStatus.error,
    RunStatus.cancelled,
    RunStatus.rejected,
    RunStatus.skipped,
]
# statuses a page keeps polling through: a flow's waiting step becomes queued by itself
ACTIVE_STATUSES = {RunStatus.waiting, RunStatus.queued, RunStatus.running}
# statuses with no output files to list yet, or ever (a skipped step never ran)
NO_OUTPUTS = {
    RunStatus.awaiting_approval,
    RunStatus.waiting,
    RunStatus.queued,
    RunStatus.running,
    RunStatus.rejected,
    RunStatus.skipped,
}


def status_badge(status: str) -> ui.badge:
    return ui.badge(status.replace("_", " "), color=STATUS_COLORS.get(status, "grey")).classes("text-sm")


def loading(text: str = "Loading…") -> None:
    with ui.row().classes("items-center gap-2 text-grey-7").mark("loading"):
        ui.spinner(size="md")
        ui.label(text)


def error_box(message: str) -> None:
    card = ui.card().classes("w-full bg-red-1 border-l-4 border-red").mark("error")
    with card, ui.row().classes("items-center gap-2 no-wrap"):
        ui.icon("error", color="negative")
        ui.label(message).classes("text-red-10")


def empty_state(message: str, icon: str = "inbox") -> None:
    with ui.column().classes("items-center w-full py-8 text-grey-6").mark("empty"):
        ui.icon(icon).classes("text-5xl")
        ui.label(message)


FEATURE_OFF = (
    "Runs are not available: this company has turned off the assistant's ability to write, "
    "and with it code execution. A company admin can turn it back on in Settings."
)

FAILED = object()  # what `call` returns when the API refused (the message is already on screen)


async def call(coro: Awaitable[T]) -> T | object:
    """Await an API call; a refusal becomes a readable notification (a 401 sends the user to sign in)."""
    try:
        return await coro
    except ApiError as exc:
        if exc.status == 401:
            session.sign_out()
            ui.navigate.to("/login")
        else:
            ui.notify(exc.message, type="negative", multi_line=True, timeout=8000)
        return FAILED


async def load_into(
    container: ui.element,
    fetch: Callable[[], Awaitable[T]],
    render: Callable[[T], Any],
    text: str = "Loading…",
) -> None:
    """Show a spinner in `container`, fetch, then render the data (or a readable error) in its place."""
    container.clear()
    with container:
        loading(text)
    try:
        data = await fetch()
    except ApiError as exc:
        container.clear()
        if exc.status == 401:
            session.sign_out()
            ui.navigate.to("/login")
            return
        with container:
            error_box(exc.message)
        return
    container.clear()
    with container:
        result = render(data)
        if hasattr(result, "__await__"):
            await result


def reveal_invisible(text: str) -> str:
    """Invisible characters shown as <U+…>: the backend's definition (the scanner's), the only one."""
    return render_visible(text)


def run_title(run: RunSummary | RunDetail) -> str:
    """A run's title as the console shows it: bidi overrides and invisible characters revealed, since the
    title is the assistant's text and a reversed or hidden part could make one run pass for another."""
    return reveal_invisible(run.title or f"Run #{run.id}")


# How the scanner writes a cell into a finding's excerpt (backend.injection.text.excerpt): invisible characters
# as <U+…> (a run as <U+…×n>, Unicode tags as the text they hide), line breaks as " ⏎ ", and a long cell cut to
# a window that starts EXCERPT_CONTEXT characters before the part that scored, with "…" where it was cut.
EXCERPT_CONTEXT = 50
ELLIPSIS = "…"
DECODES_TO = " → decodes to: "  # an encoded finding: the encoded text, then what it decodes to
_WRITTEN_OUT = re.compile(
    r"<U\+E00xx tags:(?P<tags>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")>"
    r"|<U\+[0-9A-F]{4,6}(?:×(?P<run>\d+))?>"
    r"| ⏎ "
    r"|<U(?:\+[^>]*)?\Z"  # one cut short by the excerpt's end
)


def _cell_length(written: re.Match[str]) -> int:
    """How many characters of the cell one written-out piece of the excerpt stands for."""
    if written.group("run"):
        return int(written.group("run"))
    if written.group("tags"):
        try:
            return max(1, len(ast.literal_eval(written.group("tags"))))
        except (SyntaxError, ValueError):
            return 1
    return 1


def excerpt_parts(excerpt: str, span: Sequence[int] | None) -> tuple[str, str, str]:
    """A finding's excerpt split into (before, the part that scored, after).

    The scanner's `span` is [start, end) in the cell or line, not in the excerpt, which is the cell made
    readable and possibly cut to a window; this walks the excerpt back to cell offsets. A piece written out for
    one invisible character or line break is highlighted whole. No span, a malformed one, or one outside what
    the excerpt shows: the whole excerpt, nothing highlighted."""
    whole = (excerpt, "", "")
    if (
        not span
        or len(span) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in span)
        or not 0 <= span[0] < span[1]
    ):
        return whole
    start, end = span
    shown = excerpt.partition(DECODES_TO)[0]  # an encoded finding's span is in the encoded text
    i, at = 0, 0  # position in the excerpt, offset in the cell
    if start >= EXCERPT_CONTEXT and shown.startswith(ELLIPSIS):  # cut: the window starts 50 before the span
        i, at = 1, start - EXCERPT_CONTEXT
    cut = len(shown) if not shown.endswith(ELLIPSIS) or len(shown) <= i else len(shown) - 1
    first = last = None
    while i < cut and at < end:
        written = _WRITTEN_OUT.match(shown, i, cut)
        step, length = (written.end(), _cell_length(written)) if written else (i + 1, 1)
        if at + length > start:
            first = i if first is None else first
            last = min(step, cut)
        i, at = step, at + length
    if first is None or last is None or last <= first:
        return whole
    return excerpt[:first], excerpt[first:last], excerpt[last:]


class Excerpt(ui.element):
    """A finding's excerpt with the part that scored in a <mark>; every piece is text, never HTML."""

    def __init__(self, excerpt: str, span: Sequence[int] | None) -> None:
        super().__init__("div")
        self.shown = reveal_invisible(excerpt)
        self.classes("cr-excerpt w-full")
        before, scored, after = excerpt_parts(excerpt, span)
        with self:
            # split first, then reveal each piece: the offsets are the excerpt's as the scanner wrote it
            if before:
                TextElement(tag="span", text=reveal_invisible(before))
            if scored:
                TextElement(tag="mark", text=reveal_invisible(scored)).classes(
                    "bg-orange-3 text-black rounded-sm"
                ).mark("scored")
            if after:
                TextElement(tag="span", text=reveal_invisible(after))

    def _displayed_contents(self, *, only_visible: bool) -> list:
        return [self.shown]  # the excerpt as one text, as a reader sees it across the pieces


def code_block(code: str) -> ui.html:
    """The full code, syntax-highlighted, with line numbers; invisible characters made visible. Each line is
    a span of its own (`cr-line-N`): a phone soft-wraps them and numbers them itself (console/theme.py)."""
    formatter = HtmlFormatter(
        linenos="table", noclasses=True, style="default", nobackground=True, linespans="cr-line"
    )
    html = highlight(reveal_invisible(code), PythonLexer(stripnl=False, ensurenl=True), formatter)
    return ui.html(html, sanitize=False).classes("cr-code w-full overflow-x-auto border rounded").mark("code")


def diff_block(diff: str) -> ui.html:
    formatter = HtmlFormatter(noclasses=True, style="default", nobackground=True)
    html = highlight(reveal_invisible(diff), DiffLexer(), formatter)
    return (
        ui.html(html, sanitize=False)
        .classes("cr-code w-full overflow-x-auto border rounded p-2")
        .mark("diff")
    )


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


# ------------------------------------------------------------------ the parts of a run, on its page and a flow's


def section(title: str, icon: str, marker: str | None = None) -> ui.card:
    card = ui.card().classes("w-full gap-2")
    if marker:
        card.mark(marker)
    with card, ui.row().classes("items-center gap-2"):
        ui.icon(icon, color="primary")
        ui.label(title).classes("text-lg font-medium")
    return card


CODE_PATH = "run.py"  # the path of the backend's findings in the code itself


def code_findings(run: RunDetail) -> list[Finding]:
    """The backend's findings in the code itself (invisible or direction-control characters): the console
    shows them, it does not decide what counts as invisible."""
    return [f for f in run.findings if f.path == CODE_PATH]


def code_lines(code: str) -> int:
    return code.count("\n") + (0 if code.endswith("\n") else 1)


# Code can be hidden past what a reader sees of a line: `x = 1`, 300 spaces, then `; open(...)` reads as one
# harmless line in a box that scrolls sideways. The approval screen flags lines longer than LONG_LINE columns
# (tabs at 8) and runs of more than SPACE_RUN spaces between two characters of a line (indentation and trailing
# spaces hide nothing after them; indentation that pushes code out of sight is a long line).
LONG_LINE = 150
SPACE_RUN = 20
_SPACE_RUN = re.compile(rf"\S\s{{{SPACE_RUN + 1},}}\S")  # any space: U+00A0, U+2003… too


def wide_lines(code: str) -> tuple[list[int], list[int]]:
    """The line numbers (from 1) of lines longer than LONG_LINE columns, and of lines with a run of more than
    SPACE_RUN spaces inside them."""
    long, spaced = [], []
    for number, line in enumerate(code.splitlines(), start=1):
        wide = line.expandtabs(8)
        if len(wide) > LONG_LINE:
            long.append(number)
        if _SPACE_RUN.search(wide):
            spaced.append(number)
    return long, spaced


def _line_list(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:5])
    return shown + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")


def wide_line_chips(code: str, where: str = "") -> None:
    """The approval summary's flags for code a reader may not see on the line it is on (`where`: which
    step's code, on a flow's page)."""
    long, spaced = wide_lines(code)
    if long:
        ui.chip(
            f"{where}line(s) {_line_list(long)} longer than {LONG_LINE} columns: read them to the end",
            icon="keyboard_tab",
            color="red-2",
        ).mark("long-lines")
    if spaced:
        ui.chip(
            f"{where}line(s) {_line_list(spaced)} with a run of more than {SPACE_RUN} spaces: "
            "code may sit out of sight after it",
            icon="space_bar",
            color="red-2",
        ).mark("space-runs")


def bundle_hash(run: RunDetail) -> str | None:
    """The staged data's hash as the page shows it: what an approval sends back."""
    return run.bundle_sha256 or Manifest.of(run.manifest).bundle_sha256


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


def manifest_rows(manifest: Manifest) -> list[dict[str, Any]]:
    """The manifest as the rows of its table (the dicts here are the table's rows, not the API's JSON)."""
    rows = []
    for index, entry in enumerate(manifest.files):
        source = entry.source
        if source.type == "dataset":
            what = f"dataset {source.dataset}"
        elif source.type == "drive_file":
            what = f"file {source.name}"
            if entry.sheet:
                what += f" › {entry.sheet}" + (" (hidden sheet)" if entry.hidden else "")
        else:
            what = "Cleanroom"
        total = entry.visible_total if "visible_total" in entry.model_fields_set else entry.total_rows
        rows_text = number(entry.rows) if entry.rows is not None else "—"
        truncated = f"yes: {number(entry.rows)} of {number(total)} rows staged" if entry.truncated else "no"
        rows.append(
            {
                "key": index,
                "source": reveal_invisible(what),
                "path": reveal_invisible(entry.path),
                "kind": entry.kind or "",
                "rows": rows_text,
                "truncated": truncated,
                "size": human_bytes(entry.bytes),
                "hash": (entry.sha256 or "")[:12],
            }
        )
    return rows


MANIFEST_COLUMNS = [
    {"name": "source", "label": "Dataset or file", "field": "source", "align": "left"},
    {"name": "path", "label": "Staged as", "field": "path", "align": "left"},
    {"name": "kind", "label": "Kind", "field": "kind", "align": "left"},
    {"name": "rows", "label": "Rows", "field": "rows", "align": "right"},
    {"name": "truncated", "label": "Truncated", "field": "truncated", "align": "left"},
    {"name": "size", "label": "Size", "field": "size", "align": "right"},
    {"name": "hash", "label": "sha256", "field": "hash", "align": "left"},
]


def manifest_section(run: RunDetail, title: str = "Data staged for this run") -> None:
    manifest = Manifest.of(run.manifest)
    with section(title, "inventory_2", "manifest"):
        rows = manifest_rows(manifest)
        if rows:
            ui.table(rows=rows, columns=MANIFEST_COLUMNS, row_key="key").props(
                "dense flat bordered wrap-cells :rows-per-page-options=[0]"
            ).classes("w-full").mark("manifest-table")
        else:
            empty_state("Nothing staged.")
        for error in manifest.errors:
            name = error.name if "name" in error.model_fields_set else "?"
            error_box(f"{name} could not be converted: {error.error}")
        for warning in manifest.warnings:
            name = reveal_invisible(str(warning.name if "name" in warning.model_fields_set else "?"))
            ui.label(f"{name}: {warning.warning}").classes("text-warning").mark("manifest-warning")
        truncated = [r for r in rows if r["truncated"] != "no"]
        if truncated:
            ui.label(
                f"{len(truncated)} input(s) were cut at the row cap: the code sees only the first rows."
            ).classes("text-warning font-medium").mark("truncation-note")
        if bundle := bundle_hash(run):
            ui.label(f"bundle sha256 {bundle}").classes("text-xs text-grey-7 font-mono break-all").mark(
                "bundle-hash"
            )


def code_section(run: RunDetail) -> None:
    code = run.code or ""
    with section(f"The code, in full ({code_lines(code)} lines)", "code", "code-section"):
        hidden = code_findings(run)
        if hidden:
            error_box(
                "The code contains invisible characters, shown below as <U+…>: "
                + ", ".join(f"line {f.row}: {f.excerpt}" for f in hidden[:10])
            )
        code_block(code)
        if run.code_sha256:
            ui.label(f"code sha256 {run.code_sha256}").classes(
                "text-xs text-grey-7 font-mono break-all"
            ).mark("code-hash")


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


PHASES = {"start": "VM start", "execute": "code"}  # the sandbox's timings_ms, as a reader names them


def timings_text(run: RunDetail) -> str:
    """How long a run took, from the sandbox's own timings, else from when it started and ended."""
    if run.result is not None:
        timings = run.result.timings_ms
        phases = [
            f"{label} {getattr(timings, key) / 1000:.1f} s"
            for key, label in PHASES.items()
            if getattr(timings, key)
        ]
        return f"took {timings.total / 1000:.1f} s" + (f" ({', '.join(phases)})" if phases else "")
    if run.started_at is None or run.finished_at is None:
        return ""
    return f"took {(run.finished_at - run.started_at).total_seconds():.1f} s"


def printed_output(result: RunResult) -> None:
    """What the code printed, its errors, and the output files the sandbox refused."""
    ui.label("Printed output").classes("font-medium")
    pre(result.stdout or "(nothing printed)").mark("stdout")
    if result.stdout_truncated:
        ui.label("Output was cut at the cap.").classes("text-warning")
    if result.stderr:
        ui.label("Errors (stderr)").classes("font-medium")
        pre(result.stderr).classes("text-red-9").mark("stderr")
    for rejected in result.rejected_files:
        error_box(f"output file {rejected.name} was refused: {rejected.reason}")


def pretty_json(value: Any) -> str:
    """A parsed JSON document (a flow step's conclusion), indented; its strings are the code's text, so
    invisible characters in them are shown."""
    return reveal_invisible(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str))


PREVIEW_LIMIT = 8 * 1024 * 1024


async def outputs_section(run: RunDetail, api: Api) -> None:
    files = run.output_files
    if not files and run.status in NO_OUTPUTS:
        return
    with section("Output files (in Drive)", "folder_open", "outputs"):
        if not files:
            empty_state("The run wrote no files.", "draft")
            return
        for payload in files:
            await output_file(payload, api)


async def output_file(payload: DriveFileInfo, api: Api) -> None:
    with ui.column().classes("w-full gap-1 border rounded p-2").mark("output-file"):
        with ui.row().classes("items-center gap-3"):
            ui.icon("image" if payload.kind == "image" else "description")
            ui.label(reveal_invisible(payload.name or "?")).classes("font-medium").mark("output-name")
            ui.label(human_bytes(payload.size)).classes("text-grey-7 text-sm")
            ui.label(str(payload.sha256)[:12]).classes("text-grey-7 text-xs font-mono")

            async def download() -> None:
                got = await call(api.file_content(payload.id))
                if got is not FAILED:
                    content, media_type = got  # type: ignore[misc]
                    ui.download.content(content, payload.name, media_type)

            ui.button(icon="download", on_click=download).props("flat dense round").tooltip("Download")
        if payload.kind == "image" and (payload.size or 0) <= PREVIEW_LIMIT:
            try:
                content, media_type = await api.file_content(payload.id)
            except Exception as exc:  # noqa: BLE001 - a preview is optional; say why it is missing
                ui.label(f"no preview: {getattr(exc, 'message', exc)}").classes("text-grey-7 text-sm")
                return
            if not media_type.startswith("image/"):
                media_type = "image/png"
            data_url = f"data:{media_type};base64,{base64.b64encode(content).decode()}"
            ui.image(data_url).props("no-transition no-spinner").classes("max-w-3xl border").mark("preview")


# ------------------------------------------------------------------------------------------------- audit

SUBJECT_PAGES = {"run": "/runs/", "flow": "/flows/"}  # subjects with a page of their own in the console
SUBJECT_SLOT = r"""
<q-td :props="props">
  <a v-if="props.row.link" :href="props.row.link" class="text-primary">{{ props.value }}</a>
  <span v-else>{{ props.value }}</span>
</q-td>
"""


def subject_link(entry: AuditEntryInfo) -> str:
    """The console page of an audit entry's subject (a run or a flow), or "" when it has none."""
    page = SUBJECT_PAGES.get(entry.subject_type or "")
    subject_id = str(entry.subject_id or "")
    return f"{page}{subject_id}" if page and subject_id.isdigit() else ""


def audit_table(entries: list[AuditEntryInfo]) -> None:
    if not entries:
        empty_state("No audit entries.")
        return
    rows = [
        {
            "seq": e.seq,
            "at": when(e.at),
            "actor": e.actor,
            "action": e.action,
            "subject": f"{e.subject_type or ''} {e.subject_id or ''}".strip(),
            "link": subject_link(e),
            "data": json.dumps(e.data or {}, default=str)[:300],
        }
        for e in entries
    ]
    table = ui.table(
        rows=rows,
        columns=[
            {"name": "seq", "label": "#", "field": "seq", "align": "right"},
            {"name": "at", "label": "When", "field": "at", "align": "left", "classes": "text-no-wrap"},
            {"name": "actor", "label": "Who", "field": "actor", "align": "left"},
            {"name": "action", "label": "What", "field": "action", "align": "left"},
            {
                "name": "subject",
                "label": "Subject",
                "field": "subject",
                "align": "left",
                "classes": "text-no-wrap",
            },
            {"name": "data", "label": "Details", "field": "data", "align": "left"},
        ],
        row_key="seq",
    )
    table.props("dense flat bordered wrap-cells").classes("w-full").mark("audit-table")
    table.add_slot("body-cell-subject", SUBJECT_SLOT)
