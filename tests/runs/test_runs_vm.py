"""End to end with real VMs: proposal → approval → fresh VM → outputs in Drive → proposed actions."""

from __future__ import annotations

import json

import pytest

from backend import execution
from backend.actions.tables import ActionItem
from backend.audit.tables import AuditEntry
from backend.records.tables import Deal
from backend.runs.tables import Run
from backend.schedules import service as schedules
from tests.support.http import approve_as, decide_item_as
from tests.support.runs import CHART_CODE, as_user, proposal

pytestmark = [pytest.mark.vm, pytest.mark.sqlite]


async def _approve_and_run(client, headers, body) -> dict:
    run = (await client.post("/api/runs", json=body, headers=headers)).json()
    assert run["status"] == "awaiting_approval", run
    r = await approve_as(client, "alice@acme.example", run)  # a person decides, in a session
    assert r.status_code == 200, r.text
    await execution.drain()
    return (await client.get(f"/api/runs/{run['id']}", headers=headers)).json()


async def test_approved_run_succeeds_with_a_chart_in_drive(client, alice, acme_on) -> None:
    done = await _approve_and_run(client, alice, proposal(code=CHART_CODE))
    assert done["status"] == "succeeded", (done["error_message"], done["result"])
    assert "negotiation" in done["result"]["stdout"]
    assert done["result"]["vm"]["nics"] == 0 and done["result"]["vm"]["virt_type"] in ("kvm", "qemu")
    assert [f["name"] for f in done["output_files"]] == ["pipeline.png"]
    chart = await client.get(f"/api/drive/files/{done['output_files'][0]['id']}/content", headers=alice)
    assert chart.status_code == 200 and chart.content.startswith(b"\x89PNG")
    assert done["credits_charged"] and done["credits_charged"] >= 1
    actions = [
        e["action"]
        for e in await AuditEntry.select().where(
            (AuditEntry.subject_type == "run") & (AuditEntry.subject_id == str(done["id"]))
        )
    ]
    assert actions[:4] == ["run.proposed", "run.approved", "run.started", "credits.charged"] or {
        "run.proposed",
        "run.approved",
        "run.started",
        "run.finished",
        "credits.charged",
    } <= set(actions)
    await as_user(client, "bob@acme.example")  # the outputs are the requester's, not everyone's
    assert (await client.get(f"/api/drive/files/{done['output_files'][0]['id']}")).status_code == 404


async def test_tampered_code_is_refused_and_no_vm_starts(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    await Run.update({Run.code: "print(open('/etc/shadow').read())"}).where(Run.id == run["id"])
    await execution.drain()
    done = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert done["status"] == "error" and "changed after approval" in done["error_message"]
    assert done["result"] is None


async def test_failed_run_is_revised_and_succeeds(client, alice, acme_on) -> None:
    done = await _approve_and_run(client, alice, proposal(code="import sys\nprint('oops')\nsys.exit(3)\n"))
    assert done["status"] == "failed" and done["result"]["exit_code"] == 3
    r = await client.post(
        f"/api/runs/{done['id']}/revisions", headers=alice, json={"code": "print('fixed')\n"}
    )
    assert r.status_code == 201
    second = r.json()
    assert second["attempt"] == 2 and "+print('fixed')" in second["diff"]
    assert (await approve_as(client, "alice@acme.example", second)).status_code == 200
    await execution.drain()
    final = (await client.get(f"/api/runs/{second['id']}", headers=alice)).json()
    assert final["status"] == "succeeded" and "fixed" in final["result"]["stdout"]


async def test_actions_from_a_run_are_only_proposals_until_accepted(client, alice, acme_on) -> None:
    alice_deal = await Deal.select().where(Deal.visibility == "company").first()
    code = (
        "import json\n"
        f"json.dump([{{'op': 'update', 'dataset': 'deals', 'record_id': {alice_deal['id']},"
        " 'changes': {'probability': 77}, 'reason': 'model says so'},"
        " {'op': 'update', 'dataset': 'deals', 'record_id': 1, 'changes': {'id': 5}}],"
        " open('/work/output/actions.json', 'w'))\n"
    )
    done = await _approve_and_run(client, alice, proposal(code=code))
    assert done["status"] == "succeeded", done
    assert done["action_items_count"] == 2
    assert (await Deal.select().where(Deal.id == alice_deal["id"]).first())["probability"] == alice_deal[
        "probability"
    ]
    items = (await client.get(f"/api/runs/{done['id']}/action-items", headers=alice)).json()
    assert [i["status"] for i in items] == ["pending", "invalid"]
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"], "accept")
    assert r.status_code == 200
    assert (await Deal.select().where(Deal.id == alice_deal["id"]).first())["probability"] == 77


async def test_scheduled_firing_discards_actions_json_unread(client, alice, acme_on) -> None:
    # Frozen code that proposes a change only when the data contains a deal named "Trigger deal": the
    # origin run sees no such deal (zero actions, so it may be scheduled); the firing re-stages fresh data.
    code = (
        "import json, pandas as pd\n"
        "deals = pd.read_csv('/work/input/datasets/deals.csv')\n"
        "if (deals['name'] == 'Trigger deal').any():\n"
        "    json.dump([{'op': 'create', 'dataset': 'tasks', 'changes': {'title': 'sneaky'}}],"
        " open('/work/output/actions.json', 'w'))\n"
        "print('rows', len(deals))\n"
    )
    origin = await _approve_and_run(client, alice, proposal(code=code))
    assert origin["status"] == "succeeded" and origin["action_items_count"] == 0
    sid = (
        await client.post("/api/schedules", json={"run_id": origin["id"], "cron": "0 7 * * 1"})  # signed in
    ).json()["id"]
    template = await Deal.select().where(Deal.visibility == "company").first()
    await Deal.insert(Deal(**{**{k: v for k, v in template.items() if k != "id"}, "name": "Trigger deal"}))
    fired = await schedules.fire(sid)
    assert fired is not None
    await execution.drain()
    run = await Run.select().where(Run.id == fired).output(load_json=True).first()
    assert run["status"] == "succeeded", run
    assert run["code_sha256"] == origin["code_sha256"]
    assert run["actions_discarded"] is True  # written by the code, never parsed by the host
    assert await ActionItem.count().where(ActionItem.run == fired) == 0
    finished = (
        await AuditEntry.select()
        .where((AuditEntry.action == "run.finished") & (AuditEntry.subject_id == str(fired)))
        .first()
    )
    assert json.loads(finished["data"])["actions_discarded"] is True
