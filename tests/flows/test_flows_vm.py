"""Flows with real VMs: one fresh VM per step, what a step sees of the steps before it, the capability per
step, and the worker's re-check of each step's approval."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from backend import execution
from backend.actions.tables import ActionItem
from backend.audit.tables import AuditEntry
from backend.runs.tables import Run
from tests.support.flows import approve_flow_as, flow_body, step
from tests.support.http import decide_item_as, token_for

pytestmark = [pytest.mark.vm, pytest.mark.sqlite]

STEP_1 = """
import json, os
import pandas as pd
deals = pd.read_csv("/work/input/datasets/deals.csv")
json.dump({"deals": len(deals)}, open("/work/output/conclusion.json", "w"))
deals.groupby("stage")["amount"].sum().to_csv("/work/output/by_stage.csv")
"""

# what a step can see: its own inputs, what it was handed, and whether it can change the latter
PROBE = """
import json, os
def tree(top):
    return sorted(os.path.relpath(os.path.join(r, f), top) for r, _, fs in os.walk(top) for f in fs)
try:
    open("/work/flow/planted", "w")
    flow_writable = True
except OSError:
    flow_writable = False
conclusions = {p: json.load(open("/work/flow/" + p)) for p in tree("/work/flow") if p.endswith("conclusion.json")}
print(json.dumps({"input": tree("/work/input"), "flow": tree("/work/flow"), "conclusions": conclusions,
                  "flow_writable": flow_writable}))
json.dump({"step_saw": sorted(conclusions)}, open("/work/output/conclusion.json", "w"))
"""


async def _run_flow(client, alice, body) -> dict:
    flow = (await client.post("/api/flows", json=body, headers=alice)).json()
    assert flow.get("status") == "awaiting_approval", flow
    r = await approve_flow_as(client, "alice@acme.example", flow)
    assert r.status_code == 200, r.text
    await execution.drain()
    return (await client.get(f"/api/flows/{flow['id']}", headers=alice)).json()


async def test_three_steps_run_in_three_vms_and_see_only_their_own_inputs(client, alice, acme_on) -> None:
    body = flow_body(
        step(STEP_1, title="Totals by stage"),
        step(PROBE, ["products"], title="Probe", receives=[{"step": 1, "name": "by_stage.csv"}]),
        step(PROBE, [], title="Probe again"),
    )
    done = await _run_flow(client, alice, body)
    assert done["status"] == "succeeded", [
        (s["run"]["status"], s["run"]["error_message"]) for s in done["steps"]
    ]
    runs = [s["run"] for s in done["steps"]]
    vms = [r["result"]["vm"] for r in runs]
    # three VMs: three QEMU processes, three job nonces echoed back, three domains' worth of guests
    assert len({v["qemu_pid"] for v in vms}) == 3 and all(v["qemu_pid"] for v in vms)
    assert len({v["nonce"] for v in vms}) == 3 and all(v["nonce"] for v in vms)
    # each step's QEMU began only after the previous step had ended (its VM killed before the run ended)
    for before, vm in zip(runs, vms[1:], strict=False):
        ended = datetime.fromisoformat(before["finished_at"]).timestamp()
        assert vm["qemu_started_unix"] > ended, (vm, before["finished_at"])
    seen_2 = json.loads(runs[1]["result"]["stdout"])
    # step 2 sees its own staged data only (products), never step 1's deals
    assert any(p.endswith("products.csv") for p in seen_2["input"]), seen_2
    assert not any("deals" in p for p in seen_2["input"]), seen_2
    # ...and what step 1 handed on: its conclusion and the output step 2 named, read-only
    assert seen_2["flow"] == ["step-1/by_stage.csv", "step-1/conclusion.json"], seen_2
    assert seen_2["conclusions"]["step-1/conclusion.json"]["deals"] > 0
    assert seen_2["flow_writable"] is False
    seen_3 = json.loads(runs[2]["result"]["stdout"])
    assert seen_3["input"] == [] or all("deals" not in p and "products" not in p for p in seen_3["input"])
    # step 3 named no output: it gets the conclusions of both earlier steps and nothing else
    assert seen_3["flow"] == ["step-1/conclusion.json", "step-2/conclusion.json"], seen_3
    assert done["steps"][1]["conclusion"] == {"step_saw": ["step-1/conclusion.json"]}
    assert [c["name"] for c in done["steps"][2]["carried"]] == [
        "step-1/conclusion.json",
        "step-2/conclusion.json",
    ]
    assert done["credits_total"] == pytest.approx(sum(r["credits_charged"] for r in runs))
    usage = (await client.get("/api/credits", headers=alice)).json()
    (line,) = [f for f in usage["costliest_flows"] if f["id"] == done["id"]]
    assert line["steps_charged"] == 3 and line["credits"] == pytest.approx(done["credits_total"], abs=0.02)
    assert line["title"] == "Pipeline review" and line["email"] == "alice@acme.example"
    trail = [
        e["action"]
        for e in await AuditEntry.select(AuditEntry.action)
        .where((AuditEntry.subject_type == "flow") & (AuditEntry.subject_id == str(done["id"])))
        .order_by(AuditEntry.seq)
    ]
    assert trail == ["flow.proposed", "flow.approved", *["flow.step_handed"] * 3, "flow.finished"], trail


ACTIONS = """
import json
json.dump([{"op": "update", "dataset": "deals", "record_id": DEAL, "changes": {"probability": 61},
            "reason": "stale"}], open("/work/output/actions.json", "w"))
"""


async def test_a_read_step_proposes_nothing_and_a_propose_writes_step_does(client, alice, acme_on) -> None:
    deal = await Run.raw("SELECT id FROM deal WHERE visibility = 'company' LIMIT 1")
    code = ACTIONS.replace("DEAL", str(deal[0]["id"]))
    done = await _run_flow(
        client,
        alice,
        flow_body(
            step(code, title="Read only", capability="read"),
            step(code, title="May propose", capability="propose_writes"),
        ),
    )
    assert done["status"] == "succeeded", done
    read_step, write_step = (s["run"] for s in done["steps"])
    assert read_step["action_items_count"] == 0
    assert await ActionItem.count().where(ActionItem.run == read_step["id"]) == 0
    items = await ActionItem.select().where(ActionItem.run == write_step["id"])
    assert len(items) == 1 and items[0]["status"] == "pending"  # the positive control
    assert done["action_items_count"] == 1
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"], "accept")  # a person, one item
    assert r.status_code == 200, r.text
    # the item says where it came from: the run, its flow and the step
    accepted = r.json()
    assert (accepted["run_id"], accepted["flow_id"], accepted["flow_step"]) == (
        write_step["id"],
        done["id"],
        2,
    )
    listed = (await client.get(f"/api/runs/{write_step['id']}/action-items")).json()
    assert [(i["flow_id"], i["flow_step"]) for i in listed] == [(done["id"], 2)]


async def test_a_step_changed_after_approval_is_refused_and_the_flow_stops(client, alice, acme_on) -> None:
    flow = (
        await client.post(
            "/api/flows",
            json=flow_body(step("print('one')"), step("print('two')"), step("print('three')")),
            headers=alice,
        )
    ).json()
    assert (await approve_flow_as(client, "alice@acme.example", flow)).status_code == 200
    second = flow["steps"][1]["run"]["id"]
    await Run.update({Run.code: "print(open('/etc/shadow').read())"}).where(Run.id == second)
    await execution.drain()
    done = (await client.get(f"/api/flows/{flow['id']}", headers=alice)).json()
    statuses = [s["run"]["status"] for s in done["steps"]]
    assert statuses == ["succeeded", "error", "skipped"], statuses
    assert "changed after approval" in done["steps"][1]["run"]["error_message"]
    assert done["steps"][1]["run"]["result"] is None  # no VM started for it
    assert "step 2 ended error" in done["steps"][2]["run"]["error_message"]
    assert done["status"] == "failed"


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (
            "import json\njson.dump({'x': 'a' * 40000}, open('/work/output/conclusion.json', 'w'))\n",
            "at most 16,384 bytes",
        ),
        ("open('/work/output/conclusion.json', 'w').write('{not json')\n", "not valid JSON"),
        (
            "print('forgot the file')\n",
            "later steps receive 'by_stage.csv' from this step, but it did not write it",
        ),
    ],
    ids=["over_cap", "not_json", "named_output_missing"],
)
async def test_a_step_that_hands_on_something_bad_fails_and_nothing_reaches_the_next(
    client, alice, acme_on, code, says
) -> None:
    second = step(PROBE, [], receives=[{"step": 1, "name": "by_stage.csv"}])
    done = await _run_flow(client, alice, flow_body(step(code), second))
    first, later = (s["run"] for s in done["steps"])
    assert first["status"] == "failed" and says in first["error_message"], first
    assert later["status"] == "skipped" and later["result"] is None and later["started_at"] is None
    assert done["status"] == "failed" and done["steps"][0]["conclusion"] is None
    assert done["steps"][1]["carried"] is None  # it was never handed anything


async def test_the_flows_action_cap_counts_every_step(client, alice, acme_on) -> None:
    from tests.support.runs import enable_code

    await enable_code(flow_action_cap=1)
    deal = await Run.raw("SELECT id FROM deal WHERE visibility = 'company' LIMIT 1")
    code = ACTIONS.replace("DEAL", str(deal[0]["id"]))
    done = await _run_flow(
        client,
        alice,
        flow_body(step(code, capability="propose_writes"), step(code, capability="propose_writes")),
    )
    first, second = (s["run"] for s in done["steps"])
    assert first["action_items_count"] == 1  # within the cap of 1
    assert second["action_items_count"] == 0 and "at most 1" in second["actions_note"], second
    assert await ActionItem.count().where(ActionItem.run == second["id"]) == 0
    assert done["action_cap"] == 1 and done["action_items_count"] == 1


async def test_only_a_flow_without_proposed_changes_is_scheduled_and_its_firings_only_read(
    client, alice, acme_on
) -> None:
    from backend.flows.tables import Flow
    from backend.schedules import service as schedules

    deal = await Run.raw("SELECT id FROM deal WHERE visibility = 'company' LIMIT 1")
    writes = ACTIONS.replace("DEAL", str(deal[0]["id"]))
    proposing = await _run_flow(
        client, alice, flow_body(step(STEP_1), step(writes, capability="propose_writes"))
    )
    assert proposing["status"] == "succeeded" and proposing["action_items_count"] == 1
    r = await client.post("/api/schedules", json={"flow_id": proposing["id"], "cron": "0 6 * * *"})
    assert r.status_code == 409 and r.json()["error"] == "run_has_actions", r.text
    # the positive control: a propose_writes step that proposed nothing lets the flow be scheduled...
    quiet = await _run_flow(
        client,
        alice,
        flow_body(
            step(STEP_1),
            step(PROBE, [], receives=[{"step": 1, "name": "by_stage.csv"}], capability="propose_writes"),
        ),
    )
    assert quiet["status"] == "succeeded", quiet
    r = await client.post("/api/schedules", json={"flow_id": quiet["id"], "cron": "0 6 * * *"})
    assert r.status_code == 201, r.text
    schedule = r.json()
    assert schedule["flow_id"] == quiet["id"] and schedule["title"] == quiet["title"]
    # ...and its firing is a new flow, approved by the schedule, with every step read-only
    first_run = await schedules.fire(schedule["id"])
    assert first_run is not None
    await execution.drain()
    fired = await Flow.select().where(Flow.schedule_id == schedule["id"]).first()
    done = (await client.get(f"/api/flows/{fired['id']}", headers=alice)).json()
    assert done["status"] == "succeeded", [
        (s["run"]["status"], s["run"]["error_message"]) for s in done["steps"]
    ]
    assert [s["capability"] for s in done["steps"]] == ["read", "read"]
    assert done["approval"]["by"] == f"schedule:{schedule['id']}"
    assert json.loads(done["steps"][1]["run"]["result"]["stdout"])["flow"] == [
        "step-1/by_stage.csv",
        "step-1/conclusion.json",
    ]


async def test_an_hr_flows_later_step_keeps_employees_from_a_manager_without_hr(
    client, hannah_in_east
) -> None:
    """Review N-H1 in real VMs: hannah (HR) runs the two-step flow - step 1 reads employees and writes
    pay.csv and a conclusion, step 2 stages nothing and copies the pay.csv it receives. Step 2's files are
    tagged employees: maria, her manager without HR, cannot list, download or stage them; hannah can.
    (tests/flows/test_flow_tags.py holds the positive controls, scheduling, and the rest without VMs.)"""
    from tests.support.flows import (
        HANNAH,
        MARIA,
        SEES_ALL,
        SEES_NOTHING,
        drive_view,
        flow_as,
        outputs,
        two_steps,
    )

    token = await token_for(client, HANNAH)
    flow = (await client.post("/api/flows", json=two_steps(), headers=token)).json()
    assert flow.get("status") == "awaiting_approval", flow
    assert (await approve_flow_as(client, HANNAH, flow)).status_code == 200
    client.cookies.clear()
    await execution.drain()
    done = await flow_as(client, HANNAH, flow["id"])
    assert done["status"] == "succeeded", [
        (s["run"]["status"], s["run"]["error_message"]) for s in done["steps"]
    ]
    first, second = done["steps"]
    assert first["run"]["result"]["vm"]["nics"] == 0 and second["run"]["datasets"] == []
    assert "first row:" in first["run"]["result"]["stdout"]
    assert second["conclusion"] == {"copied_rows": first["conclusion"]["rows"]}
    assert second["source_datasets"] == ["employees"]
    files = await outputs(second["run"]["id"])
    assert {n: f["source_datasets"] for n, f in files.items()} == {
        "pay.csv": ["employees"],
        "conclusion.json": ["employees"],
    }
    for name in ("pay.csv", "conclusion.json"):
        assert await drive_view(client, MARIA, files[name], second["run"]["id"]) == SEES_NOTHING, name
        assert await drive_view(client, HANNAH, files[name], second["run"]["id"]) == SEES_ALL, name
