"""Flows over the API, without VMs: what a proposal refuses (and that it then keeps nothing), what an
approval binds, and who may decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.flows.tables import Flow
from backend.runs.tables import Run
from tests.support.flows import approve_flow_as, flow_body, hashes, step
from tests.support.http import login, token_for

pytestmark = pytest.mark.usefixtures("acme_on")


def _bundles(tmp_root: Path) -> set[str]:
    root = tmp_root / "bundles"
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


async def _propose(client, alice, *steps, **extra):
    return await client.post("/api/flows", json=flow_body(*steps, **extra), headers=alice)


async def test_a_flow_is_proposed_with_each_step_staged_and_hashed_on_its_own(client, alice) -> None:
    r = await _propose(
        client,
        alice,
        step(title="Deals"),
        step(datasets=["products"], capability="propose_writes", receives=[{"step": 1, "name": "x.csv"}]),
    )
    assert r.status_code == 201, r.text
    flow = r.json()
    assert flow["status"] == "awaiting_approval" and flow["can_decide"] is False  # a token decides nothing
    first, second = flow["steps"]
    assert (first["capability"], second["capability"]) == ("read", "propose_writes")
    assert second["receives"] == [{"step": 1, "name": "x.csv"}]
    assert first["run"]["bundle_sha256"] != second["run"]["bundle_sha256"]
    assert [f["path"] for f in first["run"]["manifest"]["files"]] != [
        f["path"] for f in second["run"]["manifest"]["files"]
    ]
    assert (first["run"]["flow_id"], first["run"]["flow_step"]) == (flow["id"], 1)
    listed = (await client.get("/api/flows", headers=alice)).json()
    assert (
        listed["items"][0]["id"] == flow["id"]
        and listed["items"][0]["step_statuses"] == ["awaiting_approval"] * 2
    )


# the proposal's checks come before anything is saved, not an engine's (a save failing midway, rolled back, runs
# on both engines: test_a_flow_whose_saving_fails_midway_keeps_no_row_and_no_bundle)
@pytest.mark.sqlite
@pytest.mark.parametrize(
    ("steps", "status", "code", "says"),
    [
        ([step()] * 11, 422, "too_many_steps", "at most 10 steps; this one has 11"),
        ([], 422, "no_steps", "at least one step"),
        ([step(), step("def broken(:\n")], 422, "syntax_error", "step 2 (A step): syntax error"),
        ([step(), step(datasets=["employees"])], 403, "dataset_forbidden", "step 2 (A step): "),
        (
            [step(), step(receives=[{"step": 3, "name": "later.csv"}]), step()],
            422,
            "receives_later_step",
            "step 2 (A step): it names the output 'later.csv' of step 3, which runs after it",
        ),
        ([step(receives=[{"step": 1, "name": "mine.csv"}])], 422, "receives_later_step", "of itself"),
        ([step(), step(receives=[{"step": 1, "name": "../etc/passwd"}])], 422, "invalid", "not an output"),
    ],
)
async def test_a_bad_flow_is_refused_naming_the_step_and_nothing_is_kept(
    client, alice, steps, status, code, says
) -> None:
    from backend.settings import get_settings

    before = _bundles(get_settings().data_dir)
    r = await _propose(client, alice, *steps)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code, body
    detail = body["detail"]
    assert says in detail, detail
    assert await Flow.count() == 0 and await Run.count().where(Run.flow_id.is_not_null()) == 0
    assert _bundles(get_settings().data_dir) == before


# the hashes compared and who may approve, not an engine's (the race with a rejection runs on both engines below)
@pytest.mark.sqlite
async def test_the_approval_binds_every_step_and_only_a_person_gives_it(client, alice) -> None:
    flow = (await _propose(client, alice, step("print(1)"), step("print(2)"))).json()
    # the assistant's own token: refused, however right its hashes are
    r = await client.post(f"/api/flows/{flow['id']}/approve", json=hashes(flow), headers=alice)
    assert r.status_code in (401, 403), r.text
    # a person with one step's hash wrong, or a step missing: refused, nothing queued
    wrong = hashes(flow)
    wrong["steps"][1]["code_sha256"] = "0" * 64
    r = await approve_flow_as(client, "alice@acme.example", flow, steps=wrong["steps"])
    assert r.status_code == 409 and "step 2" in r.json()["detail"], r.text
    r = await approve_flow_as(client, "alice@acme.example", flow, steps=hashes(flow)["steps"][:1])
    assert r.status_code == 422 and r.json()["error"] == "hashes_required", r.text
    # a step's run cannot be approved on its own
    r = await client.post(
        f"/api/runs/{flow['steps'][0]['run']['id']}/approve",
        json={k: flow["steps"][0]["run"][k] for k in ("code_sha256", "bundle_sha256")},
    )
    assert r.status_code == 409 and r.json()["error"] == "flow_step", r.text
    assert {s["run"]["status"] for s in (await client.get(f"/api/flows/{flow['id']}")).json()["steps"]} == {
        "awaiting_approval"
    }
    # the positive control: the person, with every step's hashes
    r = await approve_flow_as(client, "alice@acme.example", flow)
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["status"] == "running" and done["approval"]["by"] == "alice@acme.example"
    assert [s["run"]["status"] for s in done["steps"]] == ["queued", "waiting"]
    assert all(s["run"]["approval"]["code_sha256"] == s["run"]["code_sha256"] for s in done["steps"])
    r = await approve_flow_as(client, "alice@acme.example", flow)
    assert r.status_code == 409  # decided once


# who may see and decide, the app's (the rejection racing an approval stays on both engines below)
@pytest.mark.sqlite
async def test_another_member_cannot_see_or_decide_a_flow_and_rejecting_removes_its_bundles(
    client, alice
) -> None:
    flow = (await _propose(client, alice, step(), step())).json()
    bob = await token_for(client, "bob@acme.example")
    assert (await client.get(f"/api/flows/{flow['id']}", headers=bob)).status_code == 404
    await login(client, "bob@acme.example")
    r = await client.post(f"/api/flows/{flow['id']}/reject", json={"reason": "no"})
    assert r.status_code == 404
    await login(client, "alice@acme.example")
    r = await client.post(f"/api/flows/{flow['id']}/reject", json={"reason": "not now"})
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["status"] == "rejected" and {s["run"]["status"] for s in done["steps"]} == {"rejected"}
    for s in done["steps"]:
        row = await Run.select(Run.bundle_dir).where(Run.id == s["run"]["id"]).first()
        assert not Path(row["bundle_dir"]).exists()
    audit = (await client.get(f"/api/flows/{flow['id']}/audit")).json()
    assert [e["action"] for e in audit] == ["flow.proposed", "flow.rejected"]


# which steps a settings change cancels, the app's (the same for runs: tests/runs/test_gates_recheck)
@pytest.mark.sqlite
async def test_turning_code_execution_off_cancels_the_queued_step_and_skips_the_rest(client, alice) -> None:
    flow = (await _propose(client, alice, step(), step(), step())).json()
    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    await login(client, "admin@acme.example")
    r = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
    assert r.status_code == 200, r.text
    await login(client, "alice@acme.example")
    done = (await client.get(f"/api/flows/{flow['id']}")).json()
    assert [s["run"]["status"] for s in done["steps"]] == ["cancelled", "skipped", "skipped"]
    assert "step 1 ended cancelled" in done["steps"][1]["run"]["error_message"]
    assert done["status"] == "failed"


# the worker's restart logic over plain selects, the app's (a flow's later step filed on PostgreSQL:
# tests/fleet/test_flow_results)
@pytest.mark.sqlite
async def test_a_flow_left_between_two_steps_moves_on_when_the_worker_starts_again(client, alice) -> None:
    from datetime import UTC, datetime

    from backend.execution.execute import recover
    from backend.flows.tables import FlowStatus
    from backend.runs.tables import RunStatus

    flow = (await _propose(client, alice, step(), step())).json()
    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    first, second = (s["run"]["id"] for s in flow["steps"])
    # the service stopped right after step 1 ended, before step 2 was queued
    now = datetime.now(UTC)
    await Run.update({Run.status: RunStatus.succeeded, Run.finished_at: now}).where(Run.id == first)
    assert (await Run.select(Run.status).where(Run.id == second).first())["status"] == "waiting"
    await recover()
    assert (await Run.select(Run.status).where(Run.id == second).first())["status"] == "queued"
    assert (await Flow.select(Flow.status).where(Flow.id == flow["id"]).first())[
        "status"
    ] == FlowStatus.running


async def test_a_rejection_that_lost_the_race_to_an_approval_changes_nothing(
    client, alice, monkeypatch
) -> None:
    """Two people decide at once: the approval claims the flow first, the rejection had read it while it
    was still waiting. The rejection is told so and takes nothing: the flow runs with its bundles. (The
    positive control, a rejection alone, is the test above.)"""
    from backend.flows import service as flows

    flow = (await _propose(client, alice, step(), step())).json()
    stale = await Flow.select().where(Flow.id == flow["id"]).first()

    async def read_before_the_approval(ctx, flow_id, verb):
        return stale  # what the rejecting request saw before the approval committed

    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    monkeypatch.setattr(flows, "_to_decide", read_before_the_approval)
    r = await client.post(f"/api/flows/{flow['id']}/reject", json={"reason": "too late"})
    assert r.status_code == 409 and "decided by someone else" in r.json()["detail"], r.text
    after = (await client.get(f"/api/flows/{flow['id']}")).json()
    assert after["status"] == "running" and after["rejection"] is None
    assert [s["run"]["status"] for s in after["steps"]] == ["queued", "waiting"]
    for s in after["steps"]:
        row = await Run.select(Run.bundle_dir).where(Run.id == s["run"]["id"]).first()
        assert Path(row["bundle_dir"]).exists()
    audit = (await client.get(f"/api/flows/{flow['id']}/audit")).json()
    assert "flow.rejected" not in [e["action"] for e in audit]


async def test_a_flow_whose_saving_fails_midway_keeps_no_row_and_no_bundle(
    client, alice, monkeypatch
) -> None:
    """The flow and its steps are written together: a failure while saving step 2 leaves no flow, no step 1
    (a schedule's firing would have queued it with nothing after it) and no staged bundle. Control: the
    same proposal with the database answering is saved whole."""
    from backend.runs import proposal  # where every proposal's runs are made (flows' steps too)
    from backend.settings import get_settings

    before = _bundles(get_settings().data_dir)
    real = proposal.create_run

    async def failing_on_step_two(**kwargs):
        if kwargs["flow_step"] == 2:
            raise RuntimeError("the database went away")
        return await real(**kwargs)

    monkeypatch.setattr(proposal, "create_run", failing_on_step_two)
    r = await _propose(client, alice, step(), step())
    assert r.status_code == 500, r.text
    assert await Flow.count() == 0 and await Run.count().where(Run.flow_id.is_not_null()) == 0
    assert _bundles(get_settings().data_dir) == before
    monkeypatch.setattr(proposal, "create_run", real)
    r = await _propose(client, alice, step(), step())
    assert r.status_code == 201 and await Run.count().where(Run.flow_id == r.json()["id"]) == 2
