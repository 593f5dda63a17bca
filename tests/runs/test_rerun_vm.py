"""Re-run for evidence with real VMs (issue 28, item 5): a run kept under the company's data-retention setting is
re-executed by an auditor, exact code over the exact bundle, in a fresh VM; the comparison says what matched
(the printed output and a file computed from the data do; a file of os.urandom bytes does not), and the
actions.json the code writes again creates no item, changes no record and charges nothing."""

from __future__ import annotations

import pytest

from backend import execution
from backend.actions.tables import ActionItem
from backend.audit.tables import AuditEntry
from backend.credits.tables import CreditCharge
from backend.records.tables import Deal
from backend.runs.tables import Run
from tests.support.audit import make_auditor
from tests.support.http import approve_as, login
from tests.support.runs import enable_code, proposal

pytestmark = [pytest.mark.vm, pytest.mark.sqlite]

CODE = """import csv, json, os
deals = list(csv.DictReader(open('/work/input/datasets/deals.csv')))
total = sum(float(d['amount'] or 0) for d in deals)
print('deals', len(deals), 'total', round(total, 2))
open('/work/output/summary.txt', 'w').write(f'{len(deals)} {total:.2f}\\n')
open('/work/output/nonce.txt', 'w').write(os.urandom(16).hex())
json.dump([{'op': 'update', 'dataset': 'deals', 'record_id': int(deals[0]['id']),
            'changes': {'probability': 42}, 'reason': 'evidence'}], open('/work/output/actions.json', 'w'))
"""


async def test_an_auditor_reruns_a_kept_run_in_a_fresh_vm_and_sees_what_matched(client, alice) -> None:
    await enable_code(evidence_retention_days=7)
    run = (await client.post("/api/runs", json=proposal(code=CODE), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    await execution.drain()
    original = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert original["status"] == "succeeded", (original["error_message"], original["result"])
    assert original["action_items_count"] == 1
    (item,) = await ActionItem.select().where(ActionItem.run == run["id"])
    deal_before = await Deal.select().where(Deal.id == item["record_id"]).first()
    charges = await CreditCharge.count()

    await make_auditor(client)
    await login(client, "frank@acme.example")
    r = await client.post(f"/api/runs/{run['id']}/reruns")
    assert r.status_code == 202, r.text
    rerun_id = r.json()["id"]
    await execution.drain()  # the worker takes re-runs too

    done = (await client.get(f"/api/runs/{run['id']}/reruns/{rerun_id}")).json()
    assert done["status"] == "finished", done
    outcome, comparison = done["outcome"], done["comparison"]
    assert outcome["status"] == "succeeded" and outcome["vm"]["nics"] == 0
    assert outcome["actions_discarded"] is True  # written again by the code, never read
    assert comparison["printed_output_match"] is True and comparison["status_match"] is True
    assert comparison["all_match"] is False  # os.urandom differs per run
    # which files matched names the run's outputs: its contents, the requester's and admins', never an auditor's
    # (review D-L1; the auditor sees that something differed, not what)
    assert done["withheld"] and comparison["files"] == []
    client.cookies.clear()
    await login(client, "admin@acme.example")
    seen = (await client.get(f"/api/runs/{run['id']}/reruns/{rerun_id}")).json()
    assert seen["withheld"] is None
    matches = {f["name"]: f["match"] for f in seen["comparison"]["files"]}
    assert matches == {"summary.txt": True, "nonce.txt": False}
    client.cookies.clear()
    await login(client, "frank@acme.example")
    assert done["charged"] is False

    # actions discarded: no new item, the record untouched, nothing charged, the run's row as it was
    assert await ActionItem.count().where(ActionItem.run == run["id"]) == 1
    assert await Deal.select().where(Deal.id == item["record_id"]).first() == deal_before
    assert await CreditCharge.count() == charges
    assert await Run.select().where(Run.id == run["id"]).output(load_json=True).first() == original
    finished = (
        await AuditEntry.select()
        .where((AuditEntry.action == "run.rerun_finished") & (AuditEntry.subject_id == str(run["id"])))
        .output(load_json=True)
        .first()
    )
    assert finished["data"]["actions_discarded"] is True and finished["data"]["charged"] is False
    assert finished["data"]["printed_output_match"] is True and finished["data"]["all_match"] is False
