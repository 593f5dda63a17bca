"""Run titles and output names are the assistant's and the code's text: a bidi override or an invisible
character in them is shown as <U+…> in the console, so "report<U+202E>vsc.exe" cannot pass for
"reportexe.csv". The positive control: a plain title and output name are shown as they are."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from nicegui.testing.user import User

from tests.support.console import ANALYSIS_CODE, Assistant, sign_in

pytestmark = pytest.mark.sqlite

RLO, ZWSP = "\u202e", "\u200b"
BODY = b"stage,deals\nnegotiation,3\n"


def _run_code_writing(name: str):
    """A stand-in for `backend.sandbox.run_code` whose run writes one output file called `name`."""

    def run_code(code: str, *, out_dir: Path, **_: Any):
        from backend.sandbox.models import OutputFile, SandboxResult, Timings, VmInfo

        (out_dir / name).write_bytes(BODY)
        return SandboxResult(
            status="succeeded",
            exit_code=0,
            stdout="done\n",
            files=[OutputFile(name=name, size=len(BODY), sha256=hashlib.sha256(BODY).hexdigest())],
            timings_ms=Timings(total=800),
            vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
        )

    return run_code


async def _finished_run(
    assistant: Assistant, monkeypatch: pytest.MonkeyPatch, title: str, output: str
) -> dict:
    from backend import execution, sandbox

    await assistant.enable_code_execution()
    run = await assistant.propose(code=ANALYSIS_CODE, title=title)
    await assistant.approve("alice@acme.example", run)
    monkeypatch.setattr(sandbox, "run_code", _run_code_writing(output))
    assert await execution.execute(run["id"]) == "succeeded"
    return run


def _texts(user: User, marker: str) -> list[str]:
    return [element.text for element in user.find(marker=marker).elements]


@pytest.mark.parametrize(
    ("title", "output", "shown_title", "shown_output"),
    [
        (
            f"Quarterly totals{RLO}fdp.exe",
            f"report{RLO}vsc.exe{ZWSP}",
            "Quarterly totals<U+202E>fdp.exe",
            "report<U+202E>vsc.exe<U+200B>",
        ),
        ("Quarterly totals", "report.csv", "Quarterly totals", "report.csv"),  # the positive control
    ],
    ids=["hidden", "plain"],
)
async def test_titles_and_output_names_show_hidden_characters(
    user: User,
    assistant: Assistant,
    monkeypatch: pytest.MonkeyPatch,
    title: str,
    output: str,
    shown_title: str,
    shown_output: str,
) -> None:
    run = await _finished_run(assistant, monkeypatch, title, output)

    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="output-name", retries=50)
    assert _texts(user, "run-title") == [shown_title]
    assert _texts(user, "output-name") == [shown_output]

    await user.open("/runs")
    await user.should_see(marker="runs-table", retries=50)
    (table,) = user.find(marker="runs-table").elements
    titles = [row["title"] for row in table.rows if row["id"] == run["id"]]
    assert titles == [shown_title]
    assert all(RLO not in row["title"] and ZWSP not in row["title"] for row in table.rows)


# Code hidden past the visible width (review 2026-12-06, D-L7): `x = 1`, 300 spaces, then a call, reads as one
# harmless line in a box that scrolls sideways. The approval summary flags the line as longer than 150
# columns and as holding a run of more than 20 spaces; an ordinary long-ish line is not flagged.
HIDDEN_CALL = "x = 1" + " " * 300 + "; open('/work/output/leak.csv', 'w').write(str(deals))\n"
LONGISH = (
    "totals = deals.groupby('stage')['amount'].sum().sort_values(ascending=False)"
    "  # the pipeline by stage, largest first, for the chart\n"
)


def test_wide_lines_are_long_lines_and_runs_of_spaces_inside_a_line() -> None:
    from console.widgets import wide_lines

    code = "\n".join(
        [
            "a = 1" + " " * 300 + "; b()",  # 1: both
            "c = 1" + " " * 21 + "# d",  # 2: a run of 21 spaces in a short line
            "e = '" + "f" * 150 + "'",  # 3: long, no run
            "\t" * 6 + "g = 1" + " " * 30,  # 4: indentation and trailing spaces hide nothing after them
            "h = 1" + " " * 20 + "# i",  # 5: 20 spaces: not more than 20
            LONGISH.rstrip("\n"),  # 6: 130 columns: not flagged
        ]
    )
    assert len(LONGISH) < 150
    assert wide_lines(code) == ([1, 3], [1, 2])


@pytest.mark.parametrize(
    ("tail", "flagged"), [(HIDDEN_CALL, True), (LONGISH, False)], ids=["hidden", "plain"]
)
async def test_the_review_summary_flags_code_past_the_visible_width(
    user: User, assistant: Assistant, tail: str, flagged: bool
) -> None:
    await assistant.enable_code_execution()
    run = await assistant.propose(code=ANALYSIS_CODE + tail, with_feedback=False)
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="review-summary", retries=50)
    line = ANALYSIS_CODE.count("\n") + 1
    if flagged:
        await user.should_see(marker="long-lines")
        await user.should_see(marker="space-runs")
        assert f"line(s) {line} longer than 150 columns" in _texts(user, "long-lines")[0]
        assert f"line(s) {line} with a run of more than 20 spaces" in _texts(user, "space-runs")[0]
    else:  # the positive control: the same page, an ordinary line, no flag
        await user.should_see("lines of code")
        await user.should_not_see(marker="long-lines")
        await user.should_not_see(marker="space-runs")
