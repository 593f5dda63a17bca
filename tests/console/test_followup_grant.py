"""The follow-up grant on screen: said on the approval screen before anyone approves, shown on the approved
run, changes from an unreviewed follow-up marked as such, and its limits set by an admin."""

import pytest
from nicegui import ui
from nicegui.testing.user import User

from tests.support.console import ANALYSIS_CODE, Assistant, execute_with_stand_in_vm, sign_in

pytestmark = pytest.mark.sqlite


async def followups_on(assistant: Assistant, on: bool = True) -> None:
    await assistant.call(
        "admin@acme.example",
        "PATCH",
        "/api/company/settings",
        json={"code_execution_enabled": True, "followup_without_reapproval": on},
    )


async def test_the_approval_screen_says_what_approving_grants(user: User, assistant: Assistant) -> None:
    await followups_on(assistant)
    run = await assistant.propose()
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="followup-grant-offer", retries=50)
    await user.should_see("Follow-ups in this conversation may run without another approval until")
    await user.should_see("reading only a subset of: dataset deals, file Customer feedback.xlsx")
    await user.should_see("at most 10 follow-ups")
    # said before the decision: the offer comes ahead of the approve button in the decision card
    offer = user.find(marker="followup-grant-offer").elements.pop()
    buttons = user.find(marker="approve").elements.pop().parent_slot.parent
    order = list(offer.parent_slot.parent.default_slot.children)
    assert order.index(offer) < order.index(buttons)


async def test_no_offer_when_the_setting_is_off(user: User, assistant: Assistant) -> None:
    await followups_on(assistant, on=False)
    run = await assistant.propose()
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="decision", retries=50)
    await user.should_not_see(marker="followup-grant-offer")


async def test_changes_from_an_unreviewed_follow_up_are_marked(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await followups_on(assistant)
    parent = await assistant.propose(with_feedback=False)
    await assistant.approve("alice@acme.example", parent)
    assert await execute_with_stand_in_vm(parent["id"], monkeypatch) == "succeeded"
    child = await assistant.propose(
        code=ANALYSIS_CODE + "# a narrower look\n", with_feedback=False, followup_of=parent["id"]
    )
    assert child["status"] == "queued" and child["narrowed_from"] == parent["id"]
    assert await execute_with_stand_in_vm(child["id"], monkeypatch) == "succeeded"
    await sign_in(user, "alice@acme.example", then=f"/runs/{child['id']}")
    await user.should_see(marker="unreviewed-run", retries=50)
    await user.should_see("No person reviewed this code")
    await user.should_see(marker="action-item", retries=50)
    await user.should_see(kind=ui.chip, content="from a run no person reviewed")
    # positive control: the person-approved run's changes carry no such mark; it shows its grant instead
    await user.open(f"/runs/{parent['id']}")
    await user.should_see(marker="action-item", retries=50)
    await user.should_not_see(marker="unreviewed")
    await user.should_see(marker="followup-grant")
    await user.should_see("1 of 10 follow-ups used")


async def test_admin_sets_how_long_and_how_often(user: User, assistant: Assistant) -> None:
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="followup-hours", retries=50)
    await user.should_see("Each approval grants this for a limited time and number of follow-ups")
    user.find(marker="followup-hours").elements.pop().value = 6
    user.find(marker="followup-max-runs").elements.pop().value = 4
    user.find(marker="followup-limits-save").click()
    await user.should_see("Saved (and recorded in the audit trail).", retries=50)
    settings = await assistant.call("admin@acme.example", "GET", "/api/company/settings")
    assert settings["followup_grant_hours"] == 6 and settings["followup_grant_max_runs"] == 4
