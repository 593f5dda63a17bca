"""Flows on screen: the approval screen shows every step in full and approves them at once with the hashes it
showed; afterwards each step's result; the flow in the history, the runs list, the audit trail and settings.
The VM is a stand-in here (tests/console/test_browser_flows.py runs real ones)."""

from __future__ import annotations

from typing import Any

import pytest
from nicegui import ui
from nicegui.testing.user import User

from tests.support.console import FLOW_STEP_1, FLOW_STEP_2, Assistant, fake_flow_step, sign_in, visible_text

pytestmark = pytest.mark.sqlite


def step_entry(user: User, k: int) -> ui.element:
    return user.find(marker=f"step-{k}").elements.pop()


def inside(element: ui.element, marker: str) -> list[ui.element]:
    return [e for e in element.descendants() if marker in e._markers]


def texts_inside(element: ui.element, marker: str) -> list[str]:
    return [e.text for e in inside(element, marker)]


def labels_inside(element: ui.element) -> list[str]:
    return [e.text for e in element.descendants() if isinstance(e, ui.label)]


def shown_code(element: ui.element) -> str:
    (code,) = inside(element, "code")
    return visible_text(code.content.partition('<td class="code">')[2]).rstrip("\n")


async def open_flow(
    user: User, assistant: Assistant, email: str = "alice@acme.example", **extra: Any
) -> dict:
    await assistant.enable_code_execution()
    flow = await assistant.propose_flow(**extra)
    await sign_in(user, email, then=f"/flows/{flow['id']}")
    await user.should_see(marker="flow-header", retries=50)
    return flow


async def run_flow(flow: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker takes the approved flow through its steps, each in the stand-in VM."""
    from backend import execution, sandbox

    monkeypatch.setattr(sandbox, "run_code", fake_flow_step)
    await execution.drain()


async def finished_flow(assistant: Assistant, monkeypatch: pytest.MonkeyPatch, **extra: Any) -> dict:
    await assistant.enable_code_execution()
    flow = await assistant.propose_flow(**extra)
    await assistant.approve_flow("alice@acme.example", flow)
    await run_flow(flow, monkeypatch)
    return await assistant.call("alice@acme.example", "GET", f"/api/flows/{flow['id']}")


# ------------------------------------------------------------------------------------- the approval screen


async def test_every_step_is_shown_in_full_with_its_capability_and_what_it_receives(
    user: User, assistant: Assistant
) -> None:
    flow = await open_flow(user, assistant)
    first, second = step_entry(user, 1), step_entry(user, 2)
    assert texts_inside(first, "step-title") == ["Step 1: Count deals per stage"]
    assert texts_inside(second, "step-title") == ["Step 2: Propose the follow-up"]
    # the code of every step, every line, nothing folded
    assert shown_code(first) == FLOW_STEP_1.rstrip("\n")
    assert shown_code(second) == FLOW_STEP_2.rstrip("\n")
    # each step's capability, and a step that may write looks like a warning; a reading one does not
    (read,) = inside(first, "capability")
    (writes,) = inside(second, "capability")
    assert (read.text, writes.text) == ("read", "propose_writes")
    assert writes.props["color"] == "orange-9" and read.props["color"] != writes.props["color"]
    assert inside(second, "writes-note") and not inside(first, "writes-note")
    await user.should_see(kind=ui.chip, content="step(s) 2 may propose writes")
    # what each step gets from the ones before it
    (receives_1,) = inside(first, "receives")
    (receives_2,) = inside(second, "receives")
    assert labels_inside(receives_1) == ["Receives nothing from other steps: it is the first."]
    assert labels_inside(receives_2) == [
        "Receives every earlier step's conclusion.json, and step 1's by_stage.csv (read-only at /work/flow/)."
    ]
    # each step's own staged data, and the hashes an approval will send
    for entry, step in zip((first, second), flow["steps"], strict=True):
        (manifest,) = inside(entry, "manifest-table")
        assert [r["source"] for r in manifest.rows if r["source"].startswith("dataset")] == ["dataset deals"]
        assert texts_inside(entry, "code-hash") == [f"code sha256 {step['run']['code_sha256']}"]
        assert texts_inside(entry, "bundle-hash") == [f"bundle sha256 {step['run']['bundle_sha256']}"]
    # the decision comes after every step
    page = list(user.find(marker="steps").elements)[0].parent_slot.parent
    order = [child for child in page.default_slot.children]
    steps_at = next(i for i, c in enumerate(order) if "steps" in c._markers)
    decision_at = next(i for i, c in enumerate(order) if "decision" in c._markers)
    assert steps_at < decision_at
    await user.should_see("Approve all 2 steps and run")


async def test_each_step_shows_the_warnings_of_its_own_inputs_and_invisible_characters_in_its_code(
    user: User, assistant: Assistant
) -> None:
    await assistant.enable_code_execution()
    feedback = await assistant.feedback_file_id()
    flow = await open_flow(
        user,
        assistant,
        step_1={"files": [feedback]},  # the demo feedback sheet carries a planted instruction
        step_2={"code": "# totals\u202e per region\n" + FLOW_STEP_2},
    )
    first, second = step_entry(user, 1), step_entry(user, 2)
    found_1, found_2 = (step["run"]["findings"] for step in flow["steps"])
    assert found_1 and all(f["path"] != "run.py" for f in found_1)
    assert len(inside(first, "finding")) == len(found_1)  # the first step's inputs, on the first step
    assert "Customer feedback.xlsx › sheet Responses › row" in " ".join(labels_inside(first))
    # the second step staged no planted text: its one warning is the invisible character in its code
    assert [f["path"] for f in found_2] == ["run.py"] and len(inside(second, "finding")) == 1
    assert "Customer feedback.xlsx" not in " ".join(labels_inside(second))
    hidden = "The code contains invisible characters"
    assert any(hidden in t for t in labels_inside(second))
    assert not any(hidden in t for t in labels_inside(first))
    (code,) = inside(second, "code")
    assert "&lt;U+202E&gt;" in code.content
    (plain,) = inside(first, "code")
    assert "&lt;U+" not in plain.content  # the positive control: the first step's code has none
    await user.should_see(kind=ui.chip, content="invisible characters in the code")


async def test_approving_sends_every_step_as_shown_then_the_page_follows_the_steps(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await open_flow(user, assistant)
    user.find(marker="approve").click()
    await user.should_see("Approved: step 1 is queued", retries=50)
    await user.should_see(marker="approval", retries=50)
    await user.should_see("Approved by alice@acme.example")
    await user.should_not_see(marker="approve")
    assert texts_inside(step_entry(user, 1), "step-status") == ["queued"]
    assert texts_inside(step_entry(user, 2), "step-status") == ["waiting"]
    approved = await assistant.call("alice@acme.example", "GET", f"/api/flows/{flow['id']}")
    assert [
        (s["run"]["approval"]["code_sha256"], s["run"]["approval"]["bundle_sha256"])
        for s in approved["steps"]
    ] == [(s["run"]["code_sha256"], s["run"]["bundle_sha256"]) for s in flow["steps"]]
    await run_flow(flow, monkeypatch)
    await user.should_see(marker="conclusion", retries=80)  # the page polled, saw the steps end, re-rendered
    await user.should_see("step 2 was handed 8 deals in 2 stages", retries=50)


async def test_a_step_changed_after_the_screen_showed_it_refuses_the_approval(
    user: User, assistant: Assistant
) -> None:
    from backend.runs.tables import Run

    flow = await open_flow(user, assistant)
    changed = flow["steps"][1]["run"]["id"]
    await Run.update({Run.code: FLOW_STEP_2 + "print('and one more thing')\n"}).where(Run.id == changed)
    user.find(marker="approve").click()
    await user.should_see("step 2: the code changed since you looked at it", retries=50)
    after = await assistant.call("alice@acme.example", "GET", f"/api/flows/{flow['id']}")
    assert after["status"] == "awaiting_approval" and after["approval"] is None
    assert user.find(marker="approve").elements.pop().enabled  # the refusal leaves the decision open


async def test_reject_with_a_reason_rejects_every_step(user: User, assistant: Assistant) -> None:
    flow = await open_flow(user, assistant)
    user.find(marker="reject").click()
    user.find(marker="reject-reason").type("wrong quarter")
    user.find(marker="confirm-reject").click()
    await user.should_see(marker="rejection", retries=50)
    await user.should_see("wrong quarter")
    await user.should_not_see(marker="approve")
    after = await assistant.call("alice@acme.example", "GET", f"/api/flows/{flow['id']}")
    assert after["status"] == "rejected"
    assert [s["run"]["status"] for s in after["steps"]] == ["rejected", "rejected"]


async def test_approve_is_disabled_with_the_reason_when_credits_are_gone(
    user: User, assistant: Assistant
) -> None:
    await assistant.enable_code_execution()
    flow = await assistant.propose_flow()
    await assistant.empty_pool()
    await sign_in(user, "alice@acme.example", then=f"/flows/{flow['id']}")
    await user.should_see(marker="approve-blocked", retries=50)
    assert not user.find(marker="approve").elements.pop().enabled


async def test_a_decided_flow_offers_no_decision(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await finished_flow(assistant, monkeypatch)
    await sign_in(
        user, "admin@acme.example", then=f"/flows/{flow['id']}"
    )  # an admin could decide a waiting one
    await user.should_see(marker="approval", retries=50)
    await user.should_not_see(marker="decision")
    await user.should_not_see(marker="approve")
    await user.should_not_see(marker="reject")


async def test_another_member_gets_a_readable_not_found(user: User, assistant: Assistant) -> None:
    await assistant.enable_code_execution()
    flow = await assistant.propose_flow()
    await sign_in(user, "bob@acme.example", then=f"/flows/{flow['id']}")
    await user.should_see(marker="error", retries=50)
    await user.should_see("Not found")
    await user.should_not_see(marker="code")
    await user.should_not_see(marker="approve")


# ------------------------------------------------------------------------------------------ after running


async def test_finished_flow_shows_each_steps_result(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await finished_flow(assistant, monkeypatch)
    assert flow["status"] == "succeeded"
    await sign_in(user, "alice@acme.example", then=f"/flows/{flow['id']}")
    await user.should_see(marker="preview", retries=50)
    first, second = step_entry(user, 1), step_entry(user, 2)
    assert texts_inside(first, "step-status") == texts_inside(second, "step-status") == ["succeeded"]
    assert user.find(marker="flow-status").elements.pop().text == "succeeded"
    # what each printed, concluded and wrote
    assert texts_inside(first, "stdout") == ["step 1 counted 8 deals\n"]
    assert texts_inside(second, "stdout") == ["step 2 was handed 8 deals in 2 stages\n"]
    (conclusion,) = texts_inside(second, "conclusion")
    assert '"handed_deals": 8' in conclusion and "\n" in conclusion  # pretty, one key a line
    assert sorted(texts_inside(first, "output-name")) == ["by_stage.csv", "flow_deals_per_stage.png"]
    (preview,) = inside(first, "preview")
    assert preview.source.startswith("data:image/png;base64,iVBOR")
    assert texts_inside(second, "output-name") == []
    # what step 2 was handed, its timings, each step's run, the credits of all
    (carried,) = texts_inside(second, "carried")
    assert "step-1/conclusion.json" in carried and "step-1/by_stage.csv" in carried
    assert texts_inside(first, "step-timings") == ["took 1.2 s (VM start 0.3 s, code 0.9 s)"]
    for entry, step in zip((first, second), flow["steps"], strict=True):
        (link,) = inside(entry, "step-run-link")
        assert link.props["href"] == f"/runs/{step['run']['id']}"
    credits = user.find(marker="flow-credits").elements.pop().text
    assert credits.startswith("credits: ") and not credits.endswith("—")
    # the review material is still there, folded away
    (review,) = inside(first, "step-review")
    assert review.value is False
    await user.should_see(marker="audit-table", retries=50)
    actions = [row["action"] for row in user.find(marker="audit-table").elements.pop().rows]
    assert {"flow.proposed", "flow.approved", "flow.step_handed", "flow.finished"} <= set(actions)


async def test_a_failed_step_shows_its_error_and_the_later_step_why_it_was_skipped(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await finished_flow(assistant, monkeypatch, step_1={"code": FLOW_STEP_1 + "# FAIL\n"})
    assert flow["status"] == "failed"
    await sign_in(user, "alice@acme.example", then=f"/flows/{flow['id']}")
    await user.should_see(marker="step-outcome", retries=50)
    first, second = step_entry(user, 1), step_entry(user, 2)
    assert texts_inside(first, "step-status") == ["failed"]
    assert texts_inside(second, "step-status") == ["skipped"]
    assert any("KeyError" in t for t in texts_inside(first, "stderr"))
    await user.should_see("skipped: step 1 ended failed, so the flow stopped")
    assert not inside(second, "stdout") and not inside(second, "conclusion")


# ------------------------------------------------------------------------- the flow's step, and the lists


async def test_a_steps_run_page_links_to_its_flow_and_is_not_approved_alone(
    user: User, assistant: Assistant
) -> None:
    await assistant.enable_code_execution()
    flow = await assistant.propose_flow()
    step_2 = flow["steps"][1]["run"]["id"]
    await sign_in(user, "alice@acme.example", then=f"/runs/{step_2}")
    await user.should_see(marker="flow-link", retries=50)
    link = user.find(marker="flow-link").elements.pop()
    assert (link.text, link.props["href"]) == (f"step 2 of flow {flow['id']}", f"/flows/{flow['id']}")
    await user.should_see(marker="flow-decision")
    await user.should_not_see(marker="approve")
    # the positive control: a run of its own links to no flow and is decided on its page
    run = await assistant.propose(with_feedback=False)
    await user.open(f"/runs/{run['id']}")
    await user.should_see(marker="approve", retries=50)
    await user.should_not_see(marker="flow-link")
    await user.should_not_see(marker="flow-decision")


async def test_flows_list_in_the_nav_and_steps_marked_in_the_runs_list(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await finished_flow(assistant, monkeypatch)
    waiting = await assistant.propose_flow(title="Second look")
    alone = await assistant.propose(with_feedback=False)
    await sign_in(user, "alice@acme.example", then="/runs")
    await user.should_see(marker="runs-table", retries=50)
    rows = {r["id"]: r for r in user.find(marker="runs-table").elements.pop().rows}
    for k, step in enumerate(flow["steps"], start=1):
        assert rows[step["run"]["id"]]["flow"] == f"flow {flow['id']} · step {k}"
        assert rows[step["run"]["id"]]["flow_id"] == flow["id"]
    assert (rows[alone["id"]]["flow"], rows[alone["id"]]["flow_id"]) == ("", None)
    # the waiting steps are decided on their flow's page: one link to it, not one per step
    banner = [e for e in user.find(marker="waiting").elements.pop().descendants() if isinstance(e, ui.link)]
    targets = [e.props["href"] for e in banner]
    assert targets.count(f"/flows/{waiting['id']}") == 1 and f"/runs/{alone['id']}" in targets

    user.find(marker="nav-flows").click()
    await user.should_see(marker="flows-table", retries=50)
    rows = {r["id"]: r for r in user.find(marker="flows-table").elements.pop().rows}
    assert rows[flow["id"]]["status"] == "succeeded"
    assert rows[flow["id"]]["steps"] == "succeeded · succeeded"
    assert rows[waiting["id"]]["status"] == "awaiting approval"
    await user.should_see(marker="waiting")
    await user.should_see("2 flow(s)")
    user.find(marker="f-status").elements.pop().set_value("succeeded")
    user.find(marker="apply-filters").click()
    await user.should_see("1 flow(s)", retries=50)


async def test_a_member_lists_only_their_own_flows(user: User, assistant: Assistant) -> None:
    await assistant.enable_code_execution()
    await assistant.propose_flow()
    await sign_in(user, "bob@acme.example", then="/flows")
    await user.should_see("No flows yet", retries=50)
    await user.should_not_see(marker="flows-table")


async def test_the_audit_trail_links_flow_entries_to_their_flow(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await finished_flow(assistant, monkeypatch)
    await sign_in(user, "admin@acme.example", then="/audit")
    await user.should_see(marker="audit-table", retries=50)
    rows = user.find(marker="audit-table").elements.pop().rows
    flows = [r for r in rows if r["subject"] == f"flow {flow['id']}"]
    assert {r["action"] for r in flows} >= {"flow.proposed", "flow.approved", "flow.finished"}
    assert {r["link"] for r in flows} == {f"/flows/{flow['id']}"}
    runs = [r for r in rows if r["subject"].startswith("run ")]
    assert runs and all(r["link"] == "/runs/" + r["subject"].split()[1] for r in runs)
    others = [r for r in rows if r["subject"].split(" ")[0] not in ("run", "flow")]
    assert others and {r["link"] for r in others} == {""}  # no page for a company, a session, …


async def test_admin_sets_the_flow_action_cap_within_its_bounds(user: User, assistant: Assistant) -> None:
    await sign_in(user, "admin@acme.example", then="/settings")
    await user.should_see(marker="flow-action-cap", retries=50)
    cap = user.find(marker="flow-action-cap").elements.pop()
    assert cap.value == 20
    cap.value = 35
    user.find(marker="flow-action-cap-save").click()
    await user.should_see("Saved (and recorded in the audit trail).", retries=50)
    settings = await assistant.call("admin@acme.example", "GET", "/api/company/settings")
    assert settings["flow_action_cap"] == 35
    # over the bound: refused, and the form shows what is in force again
    user.find(marker="flow-action-cap").elements.pop().value = 501
    user.find(marker="flow-action-cap-save").click()
    await user.should_see("flow_action_cap: Input should be less than or equal to 500", retries=50)
    settings = await assistant.call("admin@acme.example", "GET", "/api/company/settings")
    assert settings["flow_action_cap"] == 35
    assert user.find(marker="flow-action-cap").elements.pop().value == 35


async def test_the_credits_page_sums_a_flows_steps(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = await finished_flow(assistant, monkeypatch)
    usage = await assistant.call("admin@acme.example", "GET", "/api/credits")
    (charged,) = [f for f in usage["costliest_flows"] if f["id"] == flow["id"]]
    await sign_in(user, "admin@acme.example", then="/credits")
    await user.should_see(marker=f"flow-cost-{flow['id']}", retries=50)
    row = user.find(marker=f"flow-cost-{flow['id']}").elements.pop()
    shown = labels_inside(row)
    assert "2 steps charged" in shown and charged["steps_charged"] == 2
    assert any(text.endswith(" credits") and text != "0 credits" for text in shown), shown
