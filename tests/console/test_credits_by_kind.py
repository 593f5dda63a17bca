"""The credits page shows runs and the assistant platform's chat turns side by side: a card per kind, and
both charts stacked by kind. Control: without any chat turn, no chat-turn card."""

from __future__ import annotations

import pytest
from nicegui.testing.user import User

from backend.credits import platform
from backend.credits.tables import PlatformToken
from tests.support.console import Assistant, execute_with_stand_in_vm, sign_in

# what the page shows, not an engine's (the charges on PostgreSQL: tests/credits)
pytestmark = pytest.mark.sqlite


async def test_runs_and_chat_turns_side_by_side(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await assistant.enable_code_execution()
    run = await assistant.propose()
    await assistant.approve("alice@acme.example", run)
    await execute_with_stand_in_vm(run["id"], monkeypatch)
    made = await platform.create_token("chat", created_by="cli:test", companies=["Acme Analytics"])
    token = await PlatformToken.select().where(PlatformToken.id == made["id"]).first()
    for key, who in (("t1", "alice@acme.example"), ("t2", "bob@acme.example")):
        await platform.charge(token, company="Acme Analytics", user=who, kind="chat_turn", amount=3, key=key)
    await sign_in(user, "admin@acme.example", then="/credits")
    await user.should_see(marker="by-kind", retries=50)
    await user.should_see(marker="kind-chat_turn")
    await user.should_see(marker="kind-run")
    await user.should_see("Used by chat turns")
    day = user.find(marker="chart-day").elements.pop()
    assert [trace.name for trace in day.figure.data] == ["runs", "chat turns"]
    people = user.find(marker="chart-user").elements.pop()
    assert {"alice@acme.example", "bob@acme.example"} <= set(people.figure.data[1].y)


async def test_control_no_chat_turns_no_chat_turn_card(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await assistant.enable_code_execution()
    run = await assistant.propose()
    await assistant.approve("alice@acme.example", run)
    await execute_with_stand_in_vm(run["id"], monkeypatch)
    await sign_in(user, "admin@acme.example", then="/credits")
    await user.should_see(marker="kind-run", retries=50)
    await user.should_not_see(marker="kind-chat_turn")


async def test_an_admin_sets_credit_limits_within_the_pool_in_the_settings(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="credit-limits", retries=50)
    await user.should_see("Plan: team")
    field = user.find(marker="credit-limit-per-person").elements.pop()
    assert field.value == 0 and field.props.get("max") == 10_000  # the pool: no higher
    field.value = 250
    user.find(marker="credit-limits-save").click()
    await user.should_see("Saved (and recorded in the audit trail).", retries=50)
    settings = await assistant.call("admin@acme.example", "GET", "/api/company/settings")
    assert settings["credit_limit_per_person"] == 250 and settings["credit_limit_per_day"] == 0
    assert settings["credit_pool"] == 10_000  # the pool itself is not the admin's to change
