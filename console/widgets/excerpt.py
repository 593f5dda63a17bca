"""A finding's excerpt, with the part that scored marked."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from nicegui import ui
from nicegui.elements.mixins.text_element import TextElement

from console.widgets.text import reveal_invisible

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
