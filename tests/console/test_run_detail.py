"""After the run: printed output, the chart from Drive, isolation evidence, credits, proposed actions."""

import pytest
from nicegui.testing.user import User

from tests.support.console import ANALYSIS_CODE, Assistant, execute_with_stand_in_vm, sign_in

pytestmark = pytest.mark.sqlite


async def finished_run(
    assistant: Assistant, monkeypatch: pytest.MonkeyPatch, code: str = ANALYSIS_CODE
) -> dict:
    await assistant.enable_code_execution()
    run = await assistant.propose(code=code)
    await assistant.approve("alice@acme.example", run)
    assert await execute_with_stand_in_vm(run["id"], monkeypatch) == "succeeded"
    return run


async def test_finished_run_shows_output_chart_isolation_and_credits(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await finished_run(assistant, monkeypatch)
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="result", retries=50)
    await user.should_see("deals per stage:")
    await user.should_see("deals_per_stage.png")
    await user.should_see(marker="preview", retries=50)
    preview = user.find(marker="preview").elements.pop()
    assert preview.source.startswith("data:image/png;base64,iVBOR")
    await user.should_see(marker="isolation")
    await user.should_see("KVM (hardware virtualization)")
    await user.should_see("lo")
    credits = user.find(marker="credits-charged").elements.pop().text
    assert credits.startswith("credits charged: ") and not credits.endswith("—")
    await user.should_see(marker="audit-table", retries=50)
    actions = [row["action"] for row in user.find(marker="audit-table").elements.pop().rows]
    assert actions[0].startswith("run.proposed") or "run.proposed" in actions
    assert "run.finished" in actions


async def test_proposed_actions_show_before_after_and_invalid_reasons(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await finished_run(assistant, monkeypatch)
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="actions-section", retries=50)
    await user.should_see(marker="action-item", retries=50)
    tables = [t.rows for t in user.find(marker="changes-table").elements]
    stage = next(rows for rows in tables if rows[0]["field"] == "stage")
    assert stage[0]["after"] == "negotiation" and stage[0]["before"] not in ("", None)
    await user.should_see(marker="item-problem")
    await user.should_see("no_such_field")


async def test_accepting_one_item_changes_only_that_item(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await finished_run(assistant, monkeypatch)
    items = await assistant.call("alice@acme.example", "GET", f"/api/runs/{run['id']}/action-items")
    pending = [i for i in items if i["status"] == "pending"]
    assert len(pending) == 1
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker=f"accept-{pending[0]['id']}", retries=50)
    user.find(marker=f"accept-{pending[0]['id']}").click()
    await user.should_see("Accepted change #1.", retries=50)
    await user.should_not_see(marker=f"accept-{pending[0]['id']}", retries=50)
    after = await assistant.call("alice@acme.example", "GET", f"/api/runs/{run['id']}/action-items")
    assert [i["status"] for i in after] == ["accepted", "invalid"]
    deal = await assistant.call("alice@acme.example", "GET", f"/api/records/deals/{pending[0]['record_id']}")
    assert deal["stage"] == "negotiation"


async def test_rejecting_an_item_leaves_the_record_alone(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await finished_run(assistant, monkeypatch)
    items = await assistant.call("alice@acme.example", "GET", f"/api/runs/{run['id']}/action-items")
    item = next(i for i in items if i["status"] == "pending")
    before = await assistant.call("alice@acme.example", "GET", f"/api/records/deals/{item['record_id']}")
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker=f"reject-{item['id']}", retries=50)
    user.find(marker=f"reject-{item['id']}").click()
    await user.should_see("Rejected change #1.", retries=50)
    after = await assistant.call("alice@acme.example", "GET", f"/api/records/deals/{item['record_id']}")
    assert after["stage"] == before["stage"]


async def test_failed_run_shows_stderr(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await assistant.enable_code_execution()
    run = await assistant.propose()
    await assistant.approve("alice@acme.example", run)
    await execute_with_stand_in_vm(run["id"], monkeypatch, fail=True)
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="stderr", retries=50)
    await user.should_see("KeyError")
    await user.should_see("The run wrote no files.")


async def test_waiting_page_updates_by_itself_when_the_run_ends(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await assistant.enable_code_execution()
    run = await assistant.propose()
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="approve", retries=50)
    user.find(marker="approve").click()
    await user.should_see("The run is queued", retries=50)
    assert await execute_with_stand_in_vm(run["id"], monkeypatch) == "succeeded"
    await user.should_see(marker="preview", retries=80)  # the page polled, saw the end, and re-rendered


async def test_a_stale_change_is_refused_with_the_reason(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await finished_run(assistant, monkeypatch, code=ANALYSIS_CODE + "# TWO CHANGES TO ONE RECORD\n")
    first, second = await assistant.call("alice@acme.example", "GET", f"/api/runs/{run['id']}/action-items")
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker=f"accept-{first['id']}", retries=50)
    user.find(marker=f"accept-{first['id']}").click()
    await user.should_see("Accepted change #1.", retries=50)
    await user.should_see(marker=f"accept-{second['id']}", retries=50)
    user.find(marker=f"accept-{second['id']}").click()
    await user.should_see("the record changed since it was staged", retries=50)
    await user.should_see(marker="item-problem", retries=50)
    after = await assistant.call("alice@acme.example", "GET", f"/api/runs/{run['id']}/action-items")
    assert [i["status"] for i in after] == ["accepted", "conflict"]
