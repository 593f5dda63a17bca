"""Re-run for evidence in the console (issue 28, item 5): the data-retention choice in Settings, and on a run's
page the re-run button (an admin's or auditor's; a member sees no such section), why it is unavailable, and the
comparison once the re-run ended. The sandbox is the console tests' stand-in; tests/runs/test_rerun_vm.py re-runs
in a real VM."""

import pytest
from nicegui.testing.user import User

from backend.execution.rerun import execute_rerun
from tests.support.console import Assistant, execute_with_stand_in_vm, fake_run_code, sign_in

pytestmark = pytest.mark.sqlite
ADMIN = "admin@acme.example"


async def _finished_run(assistant: Assistant, monkeypatch: pytest.MonkeyPatch, days: int) -> dict:
    await assistant.enable_code_execution()
    await assistant.call(ADMIN, "PATCH", "/api/company/settings", json={"evidence_retention_days": days})
    run = await assistant.propose()
    await assistant.approve("alice@acme.example", run)
    assert await execute_with_stand_in_vm(run["id"], monkeypatch) == "succeeded"
    return run


async def test_data_retention_ships_off_and_is_saved_in_the_settings(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, ADMIN, then="/settings")
    await user.should_see(marker="data-retention", retries=50)
    await user.should_see("A data-retention choice, off by default")
    field = user.find(marker="evidence-retention-days").elements.pop()
    assert field.value == 0
    field.value = 14
    user.find(marker="evidence-retention-save").click()
    await user.should_see("Saved (and recorded in the audit trail).", retries=50)
    settings = await assistant.call(ADMIN, "GET", "/api/company/settings")
    assert settings["evidence_retention_days"] == 14


async def test_an_admin_reruns_a_kept_run_and_sees_the_comparison(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await _finished_run(assistant, monkeypatch, days=7)
    await sign_in(user, ADMIN, then=f"/runs/{run['id']}")
    await user.should_see(marker="reruns-section", retries=50)
    await user.should_see(marker="rerun-kept-until", retries=50)
    user.find(marker="rerun").click()
    await user.should_see("Re-run queued", retries=50)
    (queued,) = (await assistant.call(ADMIN, "GET", f"/api/runs/{run['id']}/reruns"))["items"]
    monkeypatch.setattr("backend.sandbox.run_code", fake_run_code)
    assert await execute_rerun(queued["id"]) == "finished"
    await user.should_see("Everything matched the original run.", retries=100)  # the page polls
    assert user.find(marker="rerun-printed-match").elements.pop().text == "yes"
    (files,) = user.find(marker="rerun-files").elements
    assert [(r["name"], r["match"]) for r in files.rows] == [("deals_per_stage.png", "yes")]


async def test_without_retention_the_button_is_off_and_says_why(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await _finished_run(assistant, monkeypatch, days=0)
    await sign_in(user, ADMIN, then=f"/runs/{run['id']}")
    await user.should_see(marker="rerun-unavailable", retries=50)
    await user.should_see("keeps no bundles for evidence")
    assert not user.find(marker="rerun").elements.pop().enabled


async def test_a_member_sees_no_rerun_on_her_own_run(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await _finished_run(assistant, monkeypatch, days=7)
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="result", retries=50)
    await user.should_not_see(marker="reruns-section")
