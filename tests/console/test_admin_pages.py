"""Admin pages: the code-execution switch and its dependency, the follow-up rule, schedules, credits, audit,
health; and the run history with its filters."""

import asyncio

import httpx
import pytest
from nicegui import ui
from nicegui.testing.user import User

from backend.audit import service as audit
from backend.tenancy.tables import Company
from tests.support.console import Assistant, execute_with_stand_in_vm, sign_in
from tests.support.http import console_origin

pytestmark = pytest.mark.sqlite


def switch(user: User, marker: str) -> ui.switch:
    return user.find(marker=marker).elements.pop()


async def test_code_execution_ships_off_and_can_be_turned_on(user: User, assistant: Assistant) -> None:
    # the demo seed turns it on for Acme; start from the shipped state
    await assistant.call(
        "admin@acme.example", "PATCH", "/api/company/settings", json={"code_execution_enabled": False}
    )
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="code-execution-switch", retries=50)
    await user.should_see("Ships off")
    assert switch(user, "code-execution-switch").value is False
    user.find(marker="code-execution-switch").click()
    await user.should_see("Saved (and recorded in the audit trail).", retries=50)
    settings = await assistant.call("admin@acme.example", "GET", "/api/company/settings")
    assert settings["code_execution_enabled"] is True


async def test_switch_is_disabled_and_explained_when_assistant_writes_are_off(
    user: User, assistant: Assistant
) -> None:
    await assistant.call(
        "admin@acme.example", "PATCH", "/api/company/settings", json={"assistant_write_enabled": False}
    )
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="writes-off", retries=50)
    await user.should_see("assistant's ability to write is turned off")
    assert not switch(user, "code-execution-switch").enabled


async def test_follow_up_rule_is_explained_in_plain_words(user: User) -> None:
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="followup-switch", retries=50)
    await user.should_see("subset of the data already approved")
    await user.should_see("needs more data goes back to the normal approval screen")


async def test_schedules_empty_state_then_pause_resume_delete(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see("No schedules.", retries=50)
    await assistant.enable_code_execution()
    run = await assistant.propose(code="print('weekly count')\n", with_feedback=False)
    await assistant.approve("alice@acme.example", run)
    await execute_with_stand_in_vm(run["id"], monkeypatch)
    created = await assistant.call(
        "alice@acme.example", "POST", "/api/schedules", json={"run_id": run["id"], "cron": "0 7 * * 1"}
    )
    await user.open("/settings")
    await user.should_see(marker=f"pause-{created['id']}", retries=50)
    user.find(marker=f"pause-{created['id']}").click()
    await user.should_see(marker=f"resume-{created['id']}", retries=50)
    user.find(marker=f"resume-{created['id']}").click()
    await user.should_see(marker=f"pause-{created['id']}", retries=50)
    user.find(marker=f"delete-{created['id']}").click()
    user.find(marker="confirm-delete").click()
    await user.should_see("No schedules.", retries=50)


async def test_credits_page_shows_pool_and_charts(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await assistant.enable_code_execution()
    run = await assistant.propose()
    await assistant.approve("alice@acme.example", run)
    await execute_with_stand_in_vm(run["id"], monkeypatch)
    await sign_in(user, "admin@acme.example", then="/credits")
    await user.should_see(marker="remaining", retries=50)
    await user.should_see(marker="chart-day")
    await user.should_see(marker="chart-user")
    chart = user.find(marker="chart-user").elements.pop()
    assert "alice@acme.example" in str(chart.figure.data[0].y)
    await user.should_see("Deals per stage")  # among the costliest runs


async def test_audit_search_and_verify(user: User, assistant: Assistant) -> None:
    await assistant.enable_code_execution()
    await sign_in(user, "admin@acme.example", then="/audit")
    await user.should_see(marker="audit-table", retries=50)
    user.find(marker="audit-q").type("company")
    user.find(marker="audit-search").click()
    await user.should_see(marker="audit-table", retries=50)
    rows = user.find(marker="audit-table").elements.pop().rows
    assert rows and all("company" in (r["action"] + r["actor"]).lower() or r for r in rows)
    user.find(marker="verify-button").click()
    await user.should_see(marker="chain-ok", retries=50)
    await user.should_see("Chain intact")
    # the key that signs exports, by the fingerprint the verifier's key must have (issue 52)
    from backend.audit import signing

    await user.should_see(f"fingerprint {signing.fingerprint()}", retries=50)


async def test_health_page_answers_even_without_a_vm(user: User) -> None:
    await sign_in(user, "admin@acme.example", then="/health")
    await user.should_see(marker="virt", retries=50)
    await user.should_see(marker="queue")
    await user.should_see("Runs waiting in the queue")


async def test_run_history_filters_by_status(user: User, assistant: Assistant) -> None:
    await assistant.enable_code_execution()
    first = await assistant.propose(with_feedback=False)
    await assistant.propose("bob@acme.example", with_feedback=False, title="Bob's pipeline")
    await assistant.call(
        "alice@acme.example", "POST", f"/api/runs/{first['id']}/reject", json={"reason": "no"}
    )
    await sign_in(user, "admin@acme.example", then="/runs")
    await user.should_see(marker="runs-table", retries=50)
    rows = user.find(marker="runs-table").elements.pop().rows
    assert {r["requested_by"] for r in rows} >= {"alice@acme.example", "bob@acme.example"}
    user.find(marker="f-status").elements.pop().set_value("rejected")
    user.find(marker="apply-filters").click()
    await user.should_see(marker="run-count", retries=50)
    await user.should_see("1 run(s)", retries=50)
    rows = user.find(marker="runs-table").elements.pop().rows
    assert [r["id"] for r in rows] == [first["id"]]
    user.find(marker="f-status").elements.pop().set_value("")
    user.find(marker="f-user").type("bob@acme.example")
    user.find(marker="apply-filters").click()
    await user.should_see("Bob's pipeline", retries=50)
    rows = user.find(marker="runs-table").elements.pop().rows
    assert {r["requested_by"] for r in rows} == {"bob@acme.example"}


async def test_member_history_holds_only_their_runs(user: User, assistant: Assistant) -> None:
    await assistant.enable_code_execution()
    await assistant.propose(with_feedback=False)
    await assistant.propose("bob@acme.example", with_feedback=False, title="Bob's pipeline")
    await sign_in(user, "bob@acme.example", then="/runs")
    await user.should_see(marker="runs-table", retries=50)
    rows = user.find(marker="runs-table").elements.pop().rows
    assert {r["requested_by"] for r in rows} == {"bob@acme.example"}


async def test_empty_history_says_so(user: User) -> None:
    await sign_in(user, "hannah@acme.example", then="/runs")
    await user.should_see("No runs yet", retries=50)


async def test_run_history_filters_by_date(user: User) -> None:
    await sign_in(user, "maria@acme.example", then="/runs")
    await user.should_see(marker="runs-table", retries=50)
    user.find(marker="f-since").elements.pop().set_value("2999-01-01")
    user.find(marker="apply-filters").click()
    await user.should_see("No runs match these filters.", retries=50)
    user.find(marker="f-since").elements.pop().set_value("2000-01-01")
    user.find(marker="apply-filters").click()
    await user.should_see(marker="runs-table", retries=50)


async def test_demo_waiting_run_is_on_marias_list(user: User) -> None:
    await sign_in(user, "maria@acme.example", then="/runs")
    await user.should_see(marker="runs-table", retries=50)
    rows = user.find(marker="runs-table").elements.pop().rows
    assert [(r["title"], r["status"]) for r in rows] == [("Open pipeline by stage", "awaiting approval")]


async def test_with_assistant_writes_off_runs_say_why_they_are_gone(user: User, assistant: Assistant) -> None:
    await assistant.call(
        "admin@acme.example", "PATCH", "/api/company/settings", json={"assistant_write_enabled": False}
    )
    await sign_in(user, "admin@acme.example", then="/runs")
    await user.should_see("turned off the assistant's ability to write", retries=50)
    await user.open("/settings")
    await user.should_see("Schedules are unavailable", retries=50)
    await user.open("/credits")  # credits belong to code runs: absent with them, and said why
    await user.should_see("turned off the assistant's ability to write", retries=50)


async def test_audit_shows_older_entries_on_request(user: User, assistant: Assistant) -> None:
    async with httpx.AsyncClient(
        transport=assistant.transport, base_url=assistant.base_url, headers={"origin": console_origin()}
    ) as admin:
        await admin.post("/api/auth/login", json={"email": "admin@acme.example", "password": "demo"})
        for i in range(2):  # every settings change is an audit entry
            await admin.patch("/api/company/settings", json={"followup_without_reapproval": i % 2 == 0})
    # 208 more of the same kind, written the way the service records entries arriving at once (one batch): 210
    # requests through the API took 14 s, and what is shown, not how the trail was filled, is the point here
    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    await asyncio.gather(
        *(
            audit.record(
                "settings.changed",
                actor="admin@acme.example",  # as the service names a signed-in person (UserContext.actor)
                company_id=acme,
                subject_type="company",
                subject_id=acme,
                data={"followup_without_reapproval": {"from": i % 2 == 1, "to": i % 2 == 0}},
            )
            for i in range(208)
        )
    )
    await sign_in(user, "admin@acme.example", then="/audit")
    await user.should_see(marker="audit-table", retries=50)
    assert len(user.find(marker="audit-table").elements.pop().rows) == 200
    user.find(marker="audit-more").click()
    # while the older entries load, a spinner stands where the table was (find() raises when it is absent)
    for _ in range(300):
        await asyncio.sleep(0.1)
        try:
            tables = user.find(marker="audit-table").elements
        except AssertionError:
            continue
        if tables and len(tables.pop().rows) > 200:
            break
    else:
        pytest.fail("older entries never appeared")


async def test_drive_quotas_are_shown_and_saved_in_the_settings(user: User, assistant: Assistant) -> None:
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="drive-quotas", retries=50)
    await user.should_see("Uploads past a quota are refused")
    field = user.find(marker="drive-quota-mb-per-user").elements.pop()
    assert field.value == 2048
    field.value = 25
    user.find(marker="drive-quotas-save").click()
    await user.should_see("Saved (and recorded in the audit trail).", retries=50)
    settings = await assistant.call("admin@acme.example", "GET", "/api/company/settings")
    assert settings["drive_quota_mb_per_user"] == 25 and settings["drive_uploads_per_hour"] == 200


async def test_an_auditor_reads_the_trail_and_every_run_and_has_no_settings(
    user: User, assistant: Assistant
) -> None:
    await assistant.enable_code_execution()
    await assistant.propose("bob@acme.example", with_feedback=False, title="Bob's pipeline")
    frank = next(
        p["id"]
        for p in await assistant.call("admin@acme.example", "GET", "/api/company/people")
        if p["email"] == "frank@acme.example"
    )
    await assistant.call(
        "admin@acme.example", "PATCH", f"/api/company/people/{frank}", json={"role": "auditor"}
    )
    await sign_in(user, "frank@acme.example", then="/audit")
    await user.should_see(marker="audit-table", retries=50)  # the trail, as an admin's page shows it
    await user.should_see(marker="nav-audit")
    await user.should_not_see(marker="nav-settings")
    await user.should_not_see(marker="nav-credits")
    user.find(marker="verify-button").click()
    await user.should_see(marker="chain-ok", retries=50)
    await user.open("/runs")
    await user.should_see(marker="runs-table", retries=50)
    rows = user.find(marker="runs-table").elements.pop().rows
    assert "bob@acme.example" in {r["requested_by"] for r in rows}  # every run of the company
    await user.open("/settings")  # an admin's page: back to the runs
    await user.should_see(marker="runs-table", retries=50)
