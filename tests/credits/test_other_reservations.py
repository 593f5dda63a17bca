"""Every other way a run is let start reserves its maximum cost the same way: a flow's approval (all its
steps at once), a follow-up inside a person's grant, a schedule's firing. Each refused when the pool cannot
cover it, beside its control.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from backend.credits import service as credits
from backend.runs.tables import Run, RunStatus
from backend.schedules import service as schedules
from backend.schedules.tables import Schedule
from backend.tenancy.tables import Company
from tests.support.credits import LIMITS, MAX_COST, _acme, _pool_covering, _remaining
from tests.support.flows import approve_flow_as, flow_body, step
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal


async def _pool_leaving(credits_left: int) -> None:
    """A pool with `credits_left` (and less than one more) left after this month's charges."""
    acme = await _acme()
    total = math.ceil(await credits.used(acme)) + credits_left
    await Company.update({Company.credit_pool: total}).where(Company.id == acme)


async def _approved(client, token: dict[str, str], **kw) -> dict:
    r = await client.post("/api/runs", json=proposal(limits=LIMITS, **kw), headers=token)
    assert r.status_code == 201, r.text
    run = r.json()
    await login(client, "alice@acme.example")
    r = await client.post(
        f"/api/runs/{run['id']}/approve",
        json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
    )
    client.cookies.clear()
    assert r.status_code == 200, r.text
    return r.json()


# the one reservation's caller, the app's (the reservation under a race on PostgreSQL:
# tests/credits/test_no_overdraft)
@pytest.mark.sqlite
async def test_a_flow_reserves_for_all_its_steps_at_approval(client) -> None:
    await enable_code()
    steps = [step(title=f"step {k}", limits=LIMITS) for k in (1, 2, 3)]
    token = await token_for(client, "alice@acme.example")
    flow = (await client.post("/api/flows", json=flow_body(*steps), headers=token)).json()
    await _pool_covering(2)  # two steps' worth: the flow needs three
    r = await approve_flow_as(client, "alice@acme.example", flow)
    assert r.status_code == 402, r.text
    assert f"the maximum cost of this flow (3 steps), {3 * MAX_COST:.2f} credits" in r.json()["detail"]
    ids = [s["run"]["id"] for s in flow["steps"]]
    rows = await Run.select(Run.status).where(Run.id.is_in(ids))
    assert {r["status"] for r in rows} == {RunStatus.awaiting_approval}

    await _pool_covering(3)  # control: three steps' worth
    before = await _remaining(client)
    r = await approve_flow_as(client, "alice@acme.example", flow)
    assert r.status_code == 200, r.text
    rows = await Run.select(Run.status, Run.credits_reserved).where(Run.id.is_in(ids)).order_by(Run.flow_step)
    assert [r["status"] for r in rows] == [RunStatus.queued, RunStatus.waiting, RunStatus.waiting]
    assert [r["credits_reserved"] for r in rows] == [MAX_COST] * 3
    after = await _remaining(client)
    assert after["reserved"] == 3 * MAX_COST
    assert after["remaining"] == pytest.approx(before["remaining"] - 3 * MAX_COST)


# the one reservation's caller, the app's (the reservation under a race on PostgreSQL:
# tests/credits/test_no_overdraft)
@pytest.mark.sqlite
async def test_a_follow_up_the_pool_cannot_cover_waits_for_approval(client) -> None:
    await enable_code(followup_without_reapproval=True)
    alice = await token_for(client, "alice@acme.example")
    await _pool_leaving(int(MAX_COST) + 2)
    parent = await _approved(client, alice, datasets=["deals", "tasks"])  # 2 and a fraction left now
    body = proposal(limits=LIMITS, followup_of=parent["id"], conversation_id=parent["conversation_id"])
    run = (await client.post("/api/runs", json=body, headers=alice)).json()
    assert run["status"] == "awaiting_approval" and run["approval"] is None
    assert "cannot cover the maximum cost of this run" in run["followup_note"]
    assert (await _remaining(client))["reserved"] == MAX_COST  # the parent's only

    await _pool_leaving(3 * int(MAX_COST))  # control: enough for the parent and one more
    run = (await client.post("/api/runs", json=body, headers=alice)).json()
    assert run["status"] == "queued" and run["approval"]["kind"] == "followup", run
    assert (await _remaining(client))["reserved"] == 2 * MAX_COST


# the one reservation's caller, the app's (the reservation under a race on PostgreSQL:
# tests/credits/test_no_overdraft)
@pytest.mark.sqlite
async def test_a_schedule_firing_the_pool_cannot_cover_pauses(client) -> None:
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    await _pool_covering(3)
    origin = await _approved(client, alice)
    await Run.update({Run.status: RunStatus.succeeded}).where(Run.id == origin["id"])
    await login(client, "alice@acme.example")
    sid = (await client.post("/api/schedules", json={"run_id": origin["id"], "cron": "0 7 * * *"})).json()[
        "id"
    ]
    client.cookies.clear()
    later = datetime.now(UTC) + timedelta(days=2)

    await _pool_leaving(int(MAX_COST) - 1)  # more than the minimum, less than the run's maximum cost
    assert await schedules.fire(sid, later) is None
    row = await Schedule.select().where(Schedule.id == sid).first()
    assert row["status"] == "paused"
    assert "cannot cover the maximum cost of this scheduled run" in row["paused_reason"]
    assert not await Run.exists().where(Run.schedule_id == sid)

    await _pool_covering(1)  # control: resumed, with one run's worth left, it fires and holds it
    await login(client, "alice@acme.example")
    assert (await client.post(f"/api/schedules/{sid}/resume")).status_code == 200
    client.cookies.clear()
    run_id = await schedules.fire(sid, later)
    assert run_id is not None
    row = await Run.select(Run.status, Run.credits_reserved).where(Run.id == run_id).first()
    assert row["status"] == RunStatus.queued and row["credits_reserved"] == MAX_COST
    assert (await _remaining(client))["reserved"] == MAX_COST
