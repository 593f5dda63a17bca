"""Schedules: only write-free runs; every firing re-checks; actions.json is never read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend.actions import service as actions
from backend.runs.tables import Run
from backend.schedules import service as schedules
from backend.schedules.tables import Schedule
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company, PermissionSet
from tests.support.http import approve_as
from tests.support.runs import proposal


async def _succeeded(client, alice, entries=None) -> int:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    await Run.update({Run.status: "succeeded"}).where(Run.id == run["id"])
    if entries:
        row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
        await actions.ingest(row, entries, await load_user_context_by_email("alice@acme.example"))
    return run["id"]


@pytest.mark.sqlite  # checked on the loaded run before anything is saved, not an engine's
async def test_schedule_refused_for_a_run_with_actions(client, alice, alice_person, acme_on) -> None:
    run_id = await _succeeded(
        client, alice, [{"op": "create", "dataset": "tasks", "changes": {"title": "x"}}]
    )
    r = await client.post(
        "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "0 7 * * 1"}
    )
    assert r.status_code == 409 and r.json()["error"] == "run_has_actions"


@pytest.mark.sqlite  # the run's status and the cron's and zone's syntax, checked before a save
async def test_schedule_refused_for_unfinished_runs_and_bad_cron(
    client, alice, alice_person, acme_on
) -> None:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    r = await client.post(
        "/api/schedules", headers=alice_person, json={"run_id": run["id"], "cron": "0 7 * * 1"}
    )
    assert r.status_code == 409
    run_id = await _succeeded(client, alice)
    r = await client.post(
        "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "every monday"}
    )
    assert r.status_code == 422
    r = await client.post(
        "/api/schedules",
        headers=alice_person,
        json={"run_id": run_id, "cron": "0 7 * * 1", "timezone": "Mars/Olympus"},
    )
    assert r.status_code == 422


async def test_firing_queues_the_frozen_code_on_fresh_data_without_reading_actions(
    client, alice, alice_person, acme_on
) -> None:
    run_id = await _succeeded(client, alice)
    r = await client.post(
        "/api/schedules",
        headers=alice_person,
        json={"run_id": run_id, "cron": "0 7 * * *", "timezone": "Europe/Berlin"},
    )
    assert r.status_code == 201, r.text
    schedule = r.json()
    fired = await schedules.fire_due(datetime.now(UTC) + timedelta(days=2))
    assert len(fired) == 1
    new = await Run.select().where(Run.id == fired[0]).output(load_json=True).first()
    origin = await Run.select().where(Run.id == run_id).first()
    assert new["status"] == "queued" and new["read_actions"] is False and new["schedule_id"] == schedule["id"]
    assert (
        new["code_sha256"] == origin["code_sha256"] and new["approved_code_sha256"] == origin["code_sha256"]
    )
    assert new["bundle_dir"] != origin["bundle_dir"]


# the firing's checks, in Python (a firing on both engines: the test above; two at once on PostgreSQL:
# below)
@pytest.mark.sqlite
async def test_firing_pauses_when_a_check_fails(client, alice, alice_person, acme_on) -> None:
    run_id = await _succeeded(client, alice)
    sid = (
        await client.post(
            "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "*/15 * * * *"}
        )
    ).json()["id"]
    sales = await PermissionSet.select().where(PermissionSet.name == "Sales").output(load_json=True).first()
    grants = {k: v for k, v in sales["grants"].items() if k != "deals"}
    await PermissionSet.update({PermissionSet.grants: grants}).where(PermissionSet.id == sales["id"])
    assert await schedules.fire(sid) is None
    row = await Schedule.select().where(Schedule.id == sid).first()
    assert row["status"] == "paused" and "permission" in row["paused_reason"]
    await PermissionSet.update({PermissionSet.grants: sales["grants"]}).where(PermissionSet.id == sales["id"])
    await client.post(f"/api/schedules/{sid}/resume", headers=alice_person)
    await Company.update({Company.code_execution_enabled: False}).where(Company.name == "Acme Analytics")
    assert await schedules.fire(sid) is None
    assert "turned off" in (await Schedule.select().where(Schedule.id == sid).first())["paused_reason"]
    await Company.update({Company.code_execution_enabled: True}).where(Company.name == "Acme Analytics")
    await client.post(f"/api/schedules/{sid}/resume", headers=alice_person)
    assert await schedules.fire(sid) is not None  # positive control


@pytest.mark.sqlite  # the schedule's bookkeeping, the app's (a firing on both engines: the first firing test)
async def test_pause_resume_delete(client, alice, alice_person, acme_on) -> None:
    run_id = await _succeeded(client, alice)
    sid = (
        await client.post(
            "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "0 7 * * *"}
        )
    ).json()["id"]
    assert (await client.post(f"/api/schedules/{sid}/pause", headers=alice_person)).json()[
        "status"
    ] == "paused"
    assert (await client.post(f"/api/schedules/{sid}/resume", headers=alice_person)).json()[
        "status"
    ] == "active"
    assert (await client.delete(f"/api/schedules/{sid}", headers=alice_person)).status_code == 204
    assert (await client.get("/api/schedules", headers=alice)).json() == []


def _both_read_before_either_claims(monkeypatch) -> None:
    """The race as two replicas meet it, every time: each firing has read the schedule before either
    claims it (a barrier of two in front of the claim). Without it the outcome depended on which query
    finished first: under load one firing could read, claim and finish before the other read at all."""
    import asyncio

    claim, both = schedules._claim_firing, asyncio.Barrier(2)  # a barrier is used again once both passed

    async def after_both_read(row, now):
        await both.wait()
        return await claim(row, now)

    monkeypatch.setattr(schedules, "_claim_firing", after_both_read)


async def test_two_dispatchers_firing_one_schedule_at_once_make_one_run(
    client, alice, alice_person, acme_on, monkeypatch
) -> None:
    """Two API replicas see the same due schedule: both read it, both fire. The firing's time is claimed
    conditionally before anything is staged, so exactly one makes a run; the schedule's next time moves
    once. Control: the schedule's next firing, one interval on, is made by either dispatcher."""
    import asyncio

    _both_read_before_either_claims(monkeypatch)
    run_id = await _succeeded(client, alice)
    r = await client.post(
        "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "0 7 * * *"}
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    at = datetime.now(UTC) + timedelta(days=2)
    runs_before = await Run.count()
    first = await asyncio.gather(schedules.fire(sid, at), schedules.fire(sid, at))
    assert len([r for r in first if r]) == 1, first
    assert await Run.count() == runs_before + 1
    row = await Schedule.select().where(Schedule.id == sid).first()
    assert row["status"] == "active" and row["next_fire_at"] > at
    later = row["next_fire_at"] + timedelta(minutes=1)
    second = await asyncio.gather(schedules.fire(sid, later), schedules.fire(sid, later))
    assert len([r for r in second if r]) == 1 and await Run.count() == runs_before + 2


async def test_control_without_the_claim_the_same_race_fires_twice(
    client, alice, alice_person, acme_on, monkeypatch
) -> None:
    """Control for the test above: with the conditional claim taken out, the same two dispatchers both
    make a run (so the race is real and the test above would notice the claim's removal)."""
    import asyncio

    async def always(row, now):
        return True

    monkeypatch.setattr(schedules, "_claim_firing", always)
    run_id = await _succeeded(client, alice)
    r = await client.post(
        "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "0 7 * * *"}
    )
    sid = r.json()["id"]
    at = datetime.now(UTC) + timedelta(days=2)
    fired = await asyncio.gather(schedules.fire(sid, at), schedules.fire(sid, at))
    assert all(fired) and fired[0] != fired[1]


# the evidence pack is Python over entries read back (a firing on both engines: the first firing test)
@pytest.mark.sqlite
async def test_a_fired_runs_approval_is_its_schedule_in_its_evidence_pack(
    client, alice, alice_person, acme_on
) -> None:
    """The trail records a firing as `schedule.fired` (there is no other approval entry for it): the evidence
    pack names it as the approval. Found by the soak's approval invariant, which listed a
    `run.schedule_approved` that nothing writes; so did the evidence pack and the review."""
    run_id = await _succeeded(client, alice)
    r = await client.post(
        "/api/schedules", headers=alice_person, json={"run_id": run_id, "cron": "0 7 * * *"}
    )
    assert r.status_code == 201, r.text
    (fired,) = await schedules.fire_due(datetime.now(UTC) + timedelta(days=2))
    pack = (await client.get(f"/api/runs/{fired}/evidence", headers=alice_person)).json()
    recorded = pack["approval"]["recorded"]
    assert recorded is not None and recorded["action"] == "schedule.fired", pack["approval"]
    assert recorded["schedule_id"] == r.json()["id"]
    # control: the person-approved run it fires is recorded as a person's approval
    origin = (await client.get(f"/api/runs/{run_id}/evidence", headers=alice_person)).json()
    assert origin["approval"]["recorded"]["action"] == "run.approved"
