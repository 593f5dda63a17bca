"""The review page (console, simulated user): an auditor finds the run approved despite its warning in the
report (and not a run approved with none), filters the trail by run and sees that run's timeline, and by
person sees only that person's entries."""

import asyncio
from collections.abc import Callable

import pytest
from nicegui import ui
from nicegui.testing.user import User

from tests.support.console import Assistant, sign_in

pytestmark = pytest.mark.sqlite


async def approved_runs(assistant: Assistant) -> tuple[dict, dict]:
    """maria approves the demo's run (its feedback sheet carries a planted instruction); alice approves one
    that staged no file and was shown no warning; frank becomes an auditor."""
    demo = (
        await assistant.call("maria@acme.example", "GET", "/api/runs", params={"status": "awaiting_approval"})
    )["items"][0]
    demo = await assistant.call("maria@acme.example", "GET", f"/api/runs/{demo['id']}")
    assert {f["severity"] for f in demo["findings"]} & {"high", "medium"}
    await assistant.approve("maria@acme.example", demo)
    clean = await assistant.propose("alice@acme.example", with_feedback=False, title="Nothing to warn about")
    assert not clean["findings"]
    await assistant.approve("alice@acme.example", clean)
    people = await assistant.call("admin@acme.example", "GET", "/api/company/people")
    frank = next(p["id"] for p in people if p["email"] == "frank@acme.example")
    await assistant.call(
        "admin@acme.example", "PATCH", f"/api/company/people/{frank}", json={"role": "auditor"}
    )
    return demo, clean


async def rows_once(user: User, marker: str, settled: Callable[[list[dict]], bool]) -> list[dict]:
    """The table's rows once they satisfy `settled` (a search replaces the table: the one before it may still
    stand, or a spinner where it was); the last rows seen when they never do, for the assertion to show."""
    rows: list[dict] = []
    for _ in range(300):
        try:
            tables = user.find(marker=marker).elements
        except AssertionError:  # not on the page at this moment
            tables = set()
        rows = list(tables.pop().rows) if tables else []
        if rows and settled(rows):
            return rows
        await asyncio.sleep(0.1)
    return rows


async def test_an_auditor_finds_the_warned_approval_and_its_timeline(
    user: User, assistant: Assistant
) -> None:
    demo, clean = await approved_runs(assistant)
    await sign_in(user, "frank@acme.example", then="/audit")
    await user.should_see(marker="warned-table", retries=100)
    rows = user.find(marker="warned-table").elements.pop().rows
    assert [r["run_id"] for r in rows] == [demo["id"]]  # the clean approval is not in it
    assert rows[0]["approved_by"] == "maria@acme.example"
    await user.should_see(marker="rejections-table", retries=50)
    people = {r["person"] for r in user.find(marker="rejections-table").elements.pop().rows}
    assert people == {"maria@acme.example", "alice@acme.example"}
    await user.should_see(marker="report-schedules", retries=50)
    await user.should_see("No schedules.")

    user.find(marker="f-run").type(str(demo["id"]))
    user.find(marker="audit-search").click()
    await user.should_see(marker="timeline", retries=100)
    await user.should_see(f"Timeline of run #{demo['id']}")
    shown = sorted(user.find(kind=ui.timeline_entry).elements, key=lambda e: e.id)  # in page order
    steps = [(e.props.get("title"), e.props.get("body")) for e in shown]
    assert [title for title, _ in steps][:3] == ["proposed", "scanned", "approved"]
    assert steps[2][1] == "approved by maria@acme.example (session)"
    entries = await rows_once(user, "audit-table", lambda rows: len(rows) < 10)
    assert entries and {e["subject"] for e in entries} == {f"run {demo['id']}"}


async def test_the_person_filter_shows_only_that_persons_entries(user: User, assistant: Assistant) -> None:
    await approved_runs(assistant)
    await sign_in(user, "admin@acme.example", then="/audit")
    await user.should_see(marker="audit-table", retries=100)
    everyone = {r["actor"] for r in user.find(marker="audit-table").elements.pop().rows}
    assert len(everyone) > 1
    user.find(marker="f-person").elements.pop().set_value("alice@acme.example")
    user.find(marker="audit-search").click()
    rows = await rows_once(user, "audit-table", lambda rows: len({r["actor"] for r in rows}) < len(everyone))
    actors = {r["actor"] for r in rows}
    assert actors and all(
        a == "alice@acme.example" or a.startswith("assistant:alice@acme.example") for a in actors
    )
    await user.should_not_see(marker="timeline")  # no run chosen, no timeline
