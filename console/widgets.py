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

from backend.injection import CATEGORIES
from backend.injection.text import render_visible
from console import session
from console.api import Api, ApiError

T = TypeVar("T")

STATUS_COLORS = {
    "awaiting_approval": "orange",
    "queued": "blue-grey",
    "running": "blue",
    "succeeded": "positive",
    "failed": "negative",
    "timed_out": "negative",
    "out_of_memory": "negative",
    "error": "negative",
    "cancelled": "grey",
    "rejected": "grey",
    "pending": "orange",
    "accepted": "positive",
    "invalid": "negative",
    "conflict": "negative",
    "active": "positive",
    "paused": "grey",
    "waiting": "blue-grey-4",  # a flow's step, approved, behind the steps before it
    "skipped": "grey",  # a flow's step that never ran: an earlier step did not succeed
}
RUN_STATUSES = [
    "awaiting_approval",
    "waiting",
    "queued",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "out_of_memory",
    "error",
    "cancelled",
    "rejected",
    "skipped",
]
# statuses a page keeps polling through: a flow's waiting step becomes queued by itself
ACTIVE_STATUSES = {"waiting", "queued", "running"}
# statuses with no output files to list yet, or ever (a skipped step never ran)
NO_OUTPUTS = {"awaiting_approval", "waiting", "queued", "running", "rejected", "skipped"}


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


def run_title(run: dict[str, Any]) -> str:
    """A run's title as the console shows it: bidi overrides and invisible characters revealed, since the
    title is the assistant's text and a reversed or hidden part could make one run pass for another."""
    return reveal_invisible(run.get("title") or f"Run #{run.get('id')}")


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
    """The full code, syntax-highlighted, with line numbers; invisible characters made visible."""
    formatter = HtmlFormatter(linenos="table", noclasses=True, style="default", nobackground=True)
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


def when(value: str | None) -> str:
    if not value:
        return "—"
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
