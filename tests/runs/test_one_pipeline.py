"""The three ways a run is proposed (the assistant's run, the assistant's flow, a schedule's firing) go
through one pipeline, backend/runs/proposal.py: a gate added there refuses all three. Control: without
it, all three go through. And a proposal's answer is built from what it made, the same as reading the run
back."""

from __future__ import annotations

from typing import Any

import pytest

from backend.errors import Forbidden
from backend.flows.tables import Flow
from backend.runs import proposal
from backend.runs.tables import Run
from backend.schedules import service as schedules
from backend.schedules.tables import Schedule
from tests.support.flows import approve_flow_as, flow_body, step
from tests.support.http import approve_as
from tests.support.runs import enable_code
from tests.support.runs import proposal as run_body

pytestmark = pytest.mark.usefixtures("acme_on")

REFUSAL = "refused by the gate this test added"


async def _schedules(client: Any, alice: dict[str, str]) -> list[int]:
    """A schedule of a succeeded run and one of a succeeded flow, both alice's."""
    run = (await client.post("/api/runs", json=run_body(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    await Run.update({Run.status: "succeeded"}).where(Run.id == run["id"])
    client.cookies.clear()
    flow = (await client.post("/api/flows", json=flow_body(step(), step()), headers=alice)).json()
    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    await Run.update({Run.status: "succeeded"}).where(Run.flow_id == flow["id"])
    await Flow.update({Flow.status: "succeeded"}).where(Flow.id == flow["id"])
    ids = []
    for origin in ({"run_id": run["id"]}, {"flow_id": flow["id"]}):
        r = await client.post("/api/schedules", json={**origin, "cron": "0 7 * * *"})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    client.cookies.clear()
    return ids


async def _all_three(client: Any, alice: dict[str, str], schedule_ids: list[int]) -> dict[str, Any]:
    client.cookies.clear()
    run = await client.post("/api/runs", json=run_body(conversation_id="conv-gate"), headers=alice)
    flow = await client.post("/api/flows", json=flow_body(step(), step()), headers=alice)
    fired = [await schedules.fire(s) for s in schedule_ids]
    return {"run": run, "flow": flow, "fired": fired}


# which code path each way of proposing takes is the app's, not an engine's (the answers read back, whose
# values the engine returns, stay on both engines below)
@pytest.mark.sqlite
async def test_a_gate_added_to_the_pipeline_refuses_every_way_of_proposing(
    client, alice, monkeypatch
) -> None:
    ids = await _schedules(client, alice)

    async def refusing(p: proposal.Proposal, gated: proposal.Gated) -> None:
        raise Forbidden(REFUSAL, code="test_gate")

    monkeypatch.setattr(proposal, "GATES", [*proposal.GATES, refusing])
    before = await Run.count()
    got = await _all_three(client, alice, ids)
    for what in ("run", "flow"):
        assert got[what].status_code == 403 and got[what].json()["error"] == "test_gate", got[what].text
        assert REFUSAL in got[what].text
    assert got["fired"] == [None, None]
    paused = await Schedule.select(Schedule.status, Schedule.paused_reason).where(Schedule.id.is_in(ids))
    assert [(s["status"], s["paused_reason"]) for s in paused] == [("paused", REFUSAL)] * 2
    assert await Run.count() == before  # nothing was made


@pytest.mark.sqlite  # the control of the test above, on the same engine
async def test_control_without_the_added_gate_every_way_goes_through(client, alice) -> None:
    ids = await _schedules(client, alice)
    before = await Run.count()
    got = await _all_three(client, alice, ids)
    assert got["run"].status_code == 201, got["run"].text
    assert got["flow"].status_code == 201, got["flow"].text
    assert all(got["fired"]), got["fired"]
    assert (
        await Run.count() == before + 1 + 2 + 1 + 2
    )  # a run, a flow of two, a fired run, a fired flow of two
    fired = await Run.select(Run.status, Run.schedule_id).where(Run.id.is_in(got["fired"]))
    assert sorted(r["schedule_id"] for r in fired) == sorted(ids)
    assert {r["status"] for r in fired} == {"queued"}


async def test_a_proposal_answers_with_what_it_made_the_same_as_reading_it_back(client, alice) -> None:
    """A plain run, one with its own limits, and a follow-up that waits (its note set after it was made)."""
    first = await client.post("/api/runs", json=run_body(), headers=alice)
    bodies = [
        run_body(datasets=["deals", "products"], limits={"wall_seconds": 60}),
        run_body(followup_of=first.json()["id"]),
    ]
    answers = [first] + [await client.post("/api/runs", json=body, headers=alice) for body in bodies]
    for r in answers:
        assert r.status_code == 201, r.text
        again = await client.get(f"/api/runs/{r.json()['id']}", headers=alice)
        assert r.json() == again.json()
    assert answers[-1].json()["followup_note"]


async def test_a_revision_answers_with_what_it_made_the_same_as_reading_it_back(client, alice) -> None:
    """Its answer is built from the row just made and the balance its credit check read: the same as a read."""
    first = (await client.post("/api/runs", json=run_body(), headers=alice)).json()
    await Run.update({Run.status: "failed"}).where(Run.id == first["id"])
    r = await client.post(f"/api/runs/{first['id']}/revisions", json={"code": "print(2)\n"}, headers=alice)
    assert r.status_code == 201 and r.json()["attempt"] == 2 and r.json()["diff"], r.text
    again = await client.get(f"/api/runs/{r.json()['id']}", headers=alice)
    assert r.json() == again.json()


async def test_a_follow_up_let_through_answers_as_approved_the_same_as_reading_it_back(client, alice) -> None:
    await enable_code(followup_without_reapproval=True)
    first = (await client.post("/api/runs", json=run_body(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", first)).status_code == 200
    client.cookies.clear()
    r = await client.post("/api/runs", json=run_body(followup_of=first["id"]), headers=alice)
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    assert r.json()["approval"]["kind"] == "followup" and r.json()["narrowed_from"] == first["id"]
    again = await client.get(f"/api/runs/{r.json()['id']}", headers=alice)
    assert r.json() == again.json()
