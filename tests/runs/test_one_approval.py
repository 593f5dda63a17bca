"""A run is approved in one place, backend/runs/approval.py, whoever approves it: a person approving a run, a
person approving a flow, a follow-up let through by a grant, and a schedule's firing. A check added there
(`approval.check`) refuses all four, each in its own way (a person is told 409, the follow-up waits for a
person saying why, the schedule pauses saying why), and nothing is approved. Control: without it, all four
are approved, each with its own kind."""

from __future__ import annotations

from typing import Any

import pytest

from backend.flows.tables import Flow
from backend.runs import approval
from backend.runs.tables import Run
from backend.schedules import service as schedules
from backend.schedules.tables import Schedule
from tests.support.flows import approve_flow_as, flow_body, step
from tests.support.http import approve_as
from tests.support.runs import enable_code
from tests.support.runs import proposal as run_body

pytestmark = [pytest.mark.usefixtures("acme_on"), pytest.mark.sqlite]  # which path is taken is the app's

REFUSAL = "refused by the check this test added"


async def _four(client: Any, alice: dict[str, str], *, refusing: pytest.MonkeyPatch | None) -> dict[str, Any]:
    """A run and a flow awaiting a person, a follow-up proposed under a grant, a schedule fired; the check
    added (by `refusing`) only once the grant and the schedule exist, which a person's approval made."""
    await enable_code(followup_without_reapproval=True)
    parent = (await client.post("/api/runs", json=run_body(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", parent)).status_code == 200
    await Run.update({Run.status: "succeeded"}).where(Run.id == parent["id"])
    made = await client.post("/api/schedules", json={"run_id": parent["id"], "cron": "0 7 * * *"})
    assert made.status_code == 201, made.text
    schedule_id = made.json()["id"]
    client.cookies.clear()
    run = (await client.post("/api/runs", json=run_body(code="print('waits')"), headers=alice)).json()
    flow = (await client.post("/api/flows", json=flow_body(step(), step()), headers=alice)).json()
    client.cookies.clear()

    if refusing is not None:

        def check(decision: approval.Approval) -> None:
            raise approval.NotApprovable(REFUSAL)

        refusing.setattr(approval, "check", check)
    followup = await client.post("/api/runs", json=run_body(followup_of=parent["id"]), headers=alice)
    assert followup.status_code == 201, followup.text
    fired = await schedules.fire(schedule_id)
    return {
        "run": (run["id"], await approve_as(client, "alice@acme.example", run)),
        "flow": (flow["id"], await approve_flow_as(client, "alice@acme.example", flow)),
        "followup": followup.json(),
        "fired": fired,
        "schedule": await Schedule.select().where(Schedule.id == schedule_id).first(),
    }


async def _status(run_id: int) -> tuple[str, str | None]:
    row = await Run.select(Run.status, Run.approval_kind).where(Run.id == run_id).first()
    return row["status"], row["approval_kind"]


async def test_a_check_added_to_the_decision_module_refuses_all_four_ways_of_approving(
    client, alice, monkeypatch
) -> None:
    got = await _four(client, alice, refusing=monkeypatch)
    run_id, answer = got["run"]
    assert answer.status_code == 409 and answer.json()["error"] == "not_approvable", answer.text
    assert await _status(run_id) == ("awaiting_approval", None)
    flow_id, answer = got["flow"]
    assert answer.status_code == 409 and REFUSAL in answer.text, answer.text
    assert (await Flow.select(Flow.status).where(Flow.id == flow_id).first())["status"] == "awaiting_approval"
    steps = await Run.select(Run.status, Run.approved_at).where(Run.flow_id == flow_id)
    assert {(s["status"], s["approved_at"]) for s in steps} == {("awaiting_approval", None)}
    followup = got["followup"]
    assert followup["status"] == "awaiting_approval" and followup["approval"] is None, followup
    assert REFUSAL in followup["followup_note"]
    assert got["fired"] is None
    assert (got["schedule"]["status"], got["schedule"]["paused_reason"]) == ("paused", REFUSAL)


async def test_control_without_the_added_check_all_four_are_approved(client, alice) -> None:
    got = await _four(client, alice, refusing=None)
    run_id, answer = got["run"]
    assert answer.status_code == 200, answer.text
    assert await _status(run_id) == ("queued", "person")
    flow_id, answer = got["flow"]
    assert answer.status_code == 200, answer.text
    steps = (
        await Run.select(Run.status, Run.approval_kind).where(Run.flow_id == flow_id).order_by(Run.flow_step)
    )
    assert [(s["status"], s["approval_kind"]) for s in steps] == [("queued", "person"), ("waiting", "person")]
    assert got["followup"]["status"] == "queued" and got["followup"]["approval"]["kind"] == "followup"
    assert got["fired"] is not None and await _status(got["fired"]) == ("queued", "schedule")
    assert got["schedule"]["status"] == "active"
