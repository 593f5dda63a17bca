"""A run's code: highlighted, its hidden characters and wide lines flagged, in full with its hash."""

from __future__ import annotations

import re

from nicegui import ui
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

from backend.injection.schemas import Finding
from backend.runs.schemas import RunDetail
from console.widgets.loading import error_box
from console.widgets.text import reveal_invisible, section


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
