"""Re-run for evidence (issue 28, item 5), without a VM: the company's data-retention choice (off by default),
who may ask (a company admin or an auditor, signed in; never the assistant's token, a member or another
company's admin), the refusals when the bundle is not kept, the audit entries, no charge, and the bundle
sweep honouring the setting. The original runs go through the real worker with the console tests' stand-in
sandbox; a re-run in a real VM is tests/runs/test_rerun_vm.py."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

from backend import clock
from backend.actions.tables import ActionItem
from backend.audit.tables import AuditEntry
from backend.credits.tables import CreditCharge
from backend.evidence.tables import EvidenceRerun
from backend.execution.rerun import execute_rerun, recover_reruns
from backend.execution.retention import sweep_bundles
from backend.runs.tables import Run
from backend.tenancy.tables import Company
from tests.support.audit import make_auditor
from tests.support.console import ANALYSIS_CODE, execute_with_stand_in_vm, fake_run_code
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

ADMIN = "admin@acme.example"
AUDITOR = "frank@acme.example"


async def _ran(client, monkeypatch, days: int) -> dict:
    """Alice's assistant proposes a run that writes actions.json, Alice approves, the worker runs it (stand-in
    sandbox) while Acme keeps bundles `days` days. Leaves the client signed out."""
    await enable_code(evidence_retention_days=days)
    token = await token_for(client, "alice@acme.example")
    run = (await client.post("/api/runs", json=proposal(code=ANALYSIS_CODE), headers=token)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    assert await execute_with_stand_in_vm(run["id"], monkeypatch) == "succeeded"
    client.cookies.clear()
    return await Run.select().where(Run.id == run["id"]).output(load_json=True).first()


async def _entries(run_id: int, action: str) -> list[dict]:
    return (
        await AuditEntry.select()
        .where(
            (AuditEntry.subject_type == "run")
            & (AuditEntry.subject_id == str(run_id))
            & (AuditEntry.action == action)
        )
        .output(load_json=True)
    )


async def _as(client, email: str) -> None:
    client.cookies.clear()
    await login(client, email)


@pytest.mark.sqlite  # the setting's default, bounds and who may set it, not an engine's
async def test_the_setting_ships_off_and_only_an_admin_sets_it(client) -> None:
    await _as(client, ADMIN)
    assert (await client.get("/api/company/settings")).json()["evidence_retention_days"] == 0
    r = await client.patch("/api/company/settings", json={"evidence_retention_days": 30})
    assert r.status_code == 200 and r.json()["evidence_retention_days"] == 30
    change = (
        await AuditEntry.select()
        .where(AuditEntry.action == "settings.changed")
        .order_by(AuditEntry.seq, ascending=False)
        .output(load_json=True)
        .first()
    )
    assert change["data"]["evidence_retention_days"] == {"from": 0, "to": 30}
    assert (
        await client.patch("/api/company/settings", json={"evidence_retention_days": 366})
    ).status_code == 422
    await _as(client, "alice@acme.example")  # a member
    r = await client.patch("/api/company/settings", json={"evidence_retention_days": 1})
    assert r.status_code == 403
    client.cookies.clear()
    admin_token = await token_for(client, ADMIN)
    r = await client.patch("/api/company/settings", json={"evidence_retention_days": 1}, headers=admin_token)
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    row = await Company.select().where(Company.name == "Acme Analytics").first()
    assert row["evidence_retention_days"] == 30


# the retention setting's refusal, the app's (the sweep's dates on both engines: the retention test below)
@pytest.mark.sqlite
async def test_with_the_setting_off_the_bundle_goes_and_a_rerun_is_refused(client, monkeypatch) -> None:
    run = await _ran(client, monkeypatch, days=0)
    assert not os.path.isdir(run["bundle_dir"])  # gone when the run ended, as before the setting existed
    await _as(client, ADMIN)
    r = await client.post(f"/api/runs/{run['id']}/reruns")
    assert r.status_code == 409 and r.json()["error"] == "evidence_retention_off", r.text
    assert "keeps no bundles" in r.json()["detail"]
    listing = (await client.get(f"/api/runs/{run['id']}/reruns")).json()
    assert listing["available"] is False and listing["unavailable_code"] == "evidence_retention_off"
    (refused,) = await _entries(run["id"], "run.rerun_refused")
    assert refused["actor"] == ADMIN and refused["data"]["reason"] == "evidence_retention_off"
    assert await EvidenceRerun.count() == 0


@pytest.mark.sqlite  # who may ask, the app's (two requests at once on PostgreSQL: the two-process test below)
async def test_only_an_admin_or_auditor_in_a_session_may_rerun(client, monkeypatch) -> None:
    run = await _ran(client, monkeypatch, days=7)
    assert os.path.isdir(run["bundle_dir"])  # kept: the company keeps approved bundles 7 days
    path = f"/api/runs/{run['id']}/reruns"
    items_before = await ActionItem.count().where(ActionItem.run == run["id"])
    assert items_before == 2  # the original's actions.json became items
    charges_before = await CreditCharge.count()

    # the assistant's token (Alice's, and even the admin's own): refused as every decision is
    for email in ("alice@acme.example", ADMIN):
        token = await token_for(client, email)
        for method in ("POST", "GET"):
            r = await client.request(method, path, headers=token)
            assert r.status_code == 403 and r.json()["error"] == "person_required", (email, method, r.text)
    # ordinary members, the run's own requester among them
    for member in ("alice@acme.example", "bob@acme.example"):
        await _as(client, member)
        for method in ("POST", "GET"):
            r = await client.request(method, path)
            assert r.status_code == 403 and r.json()["error"] == "admin_or_auditor_only", (member, r.text)
    # another company's admin does not find the run at all
    await _as(client, "admin@globex.example")
    assert (await client.post(path)).status_code == 404
    assert (await client.get(path)).status_code == 404
    assert await EvidenceRerun.count() == 0
    assert not await _entries(run["id"], "run.rerun_requested")

    # positive control: the company admin, signed in
    await _as(client, ADMIN)
    listing = (await client.get(path)).json()
    assert listing["available"] is True and listing["retention_days"] == 7 and listing["kept_until"]
    r = await client.post(path)
    assert r.status_code == 202, r.text
    rerun = r.json()
    assert rerun["status"] == "queued" and rerun["charged"] is False and rerun["credits"] == 0
    (requested,) = await _entries(run["id"], "run.rerun_requested")
    assert requested["actor"] == ADMIN and requested["data"]["rerun_id"] == rerun["id"]
    assert requested["data"]["charged"] is False
    assert requested["data"]["code_sha256"] == run["approved_code_sha256"]
    again = await client.post(path)  # one at a time per company
    assert again.status_code == 409 and again.json()["error"] == "rerun_in_progress"

    monkeypatch.setattr("backend.sandbox.run_code", fake_run_code)  # the same outputs as the original
    assert await execute_rerun(rerun["id"]) == "finished"
    done = (await client.get(f"{path}/{rerun['id']}")).json()
    assert done["status"] == "finished", done
    comparison = done["comparison"]
    assert comparison["printed_output_match"] and comparison["all_match"], comparison
    assert [(f["name"], f["match"]) for f in comparison["files"]] == [("deals_per_stage.png", True)]
    assert "stdout_sha256" not in done["outcome"] and "stdout" not in done["outcome"]
    (finished,) = await _entries(run["id"], "run.rerun_finished")
    assert finished["data"]["all_match"] is True and finished["data"]["charged"] is False
    # discarded: no item, no charge, the run's row as it was
    assert await ActionItem.count().where(ActionItem.run == run["id"]) == items_before
    assert await CreditCharge.count() == charges_before
    after = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert after == run
    (packed,) = (await client.get(f"/api/runs/{run['id']}/evidence")).json()["reruns"]
    assert packed["id"] == rerun["id"] and packed["all_match"] is True and packed["charged"] is False
    page = (await client.get(f"/api/runs/{run['id']}/evidence/html")).text
    assert "Re-runs for evidence" in page and "deals_per_stage.png" in page
    timeline = (await client.get(f"/api/audit/runs/{run['id']}/timeline")).json()["steps"]
    summaries = [s["summary"] for s in timeline]
    assert any("for evidence asked by admin@acme.example" in s for s in summaries), summaries
    assert any("printed output matched, 1 of 1 output file(s) matched" in s for s in summaries), summaries

    # positive control: an auditor, signed in, may ask too
    await make_auditor(client)
    await _as(client, AUDITOR)
    r = await client.post(path)
    assert r.status_code == 202, r.text
    (_, by_auditor) = sorted(await _entries(run["id"], "run.rerun_requested"), key=lambda e: e["seq"])
    assert by_auditor["actor"] == AUDITOR
    listing = (await client.get(path)).json()
    assert [i["status"] for i in listing["items"]] == ["queued", "finished"]


async def test_a_bundle_past_its_retention_is_swept_and_refused(client, monkeypatch) -> None:
    run = await _ran(client, monkeypatch, days=3)
    now = clock.now()
    assert run["bundle_dir"] not in await sweep_bundles(now)  # kept inside the retention
    assert run["bundle_dir"] not in await sweep_bundles(now + timedelta(days=2))
    assert run["bundle_dir"] in await sweep_bundles(now + timedelta(days=4))  # past it: deleted
    assert not os.path.isdir(run["bundle_dir"])
    await Run.update({Run.finished_at: now - timedelta(days=4)}).where(Run.id == run["id"])
    await _as(client, ADMIN)
    r = await client.post(f"/api/runs/{run['id']}/reruns")
    assert r.status_code == 409 and r.json()["error"] == "bundle_not_kept", r.text
    assert "no longer kept" in r.json()["detail"]


# which bundles the sweep deletes, the app's (the sweep's dates on both engines: the test above)
@pytest.mark.sqlite
async def test_turning_the_setting_off_lets_the_sweep_delete_kept_bundles(client, monkeypatch) -> None:
    run = await _ran(client, monkeypatch, days=30)
    assert run["bundle_dir"] not in await sweep_bundles()
    await _as(client, ADMIN)
    r = await client.patch("/api/company/settings", json={"evidence_retention_days": 0})
    assert r.status_code == 200
    assert run["bundle_dir"] in await sweep_bundles()
    r = await client.post(f"/api/runs/{run['id']}/reruns")
    assert r.status_code == 409 and r.json()["error"] == "evidence_retention_off"


@pytest.mark.sqlite  # the hashes compared in Python, not an engine's
@pytest.mark.parametrize("what", ["code", "bundle"])
async def test_a_rerun_over_changed_code_or_data_never_starts(client, monkeypatch, what) -> None:
    run = await _ran(client, monkeypatch, days=7)
    await _as(client, ADMIN)
    rerun = (await client.post(f"/api/runs/{run['id']}/reruns")).json()
    if what == "code":
        await Run.update({Run.code: "print('not what was approved')"}).where(Run.id == run["id"])
    else:
        with open(os.path.join(run["bundle_dir"], "datasets", "deals.csv"), "a") as handle:
            handle.write("999999,forged\n")
    started = []
    monkeypatch.setattr("backend.sandbox.run_code", lambda *a, **k: started.append(1))
    assert await execute_rerun(rerun["id"]) == "refused"
    assert not started
    done = (await client.get(f"/api/runs/{run['id']}/reruns/{rerun['id']}")).json()
    assert done["status"] == "refused" and "changed after approval" in done["error_message"]
    (finished,) = await _entries(run["id"], "run.rerun_finished")
    assert finished["data"]["status"] == "refused"


@pytest.mark.sqlite  # the reaper's decision, the app's, not an engine's
async def test_a_rerun_left_running_by_a_dead_worker_ends_as_error(client, monkeypatch) -> None:
    run = await _ran(client, monkeypatch, days=7)
    await _as(client, ADMIN)
    rerun = (await client.post(f"/api/runs/{run['id']}/reruns")).json()
    await EvidenceRerun.update({EvidenceRerun.status: "running"}).where(EvidenceRerun.id == rerun["id"])
    assert run["bundle_dir"] not in await sweep_bundles(clock.now() + timedelta(days=30))  # in use: kept
    assert await recover_reruns() == 1
    done = (await client.get(f"/api/runs/{run['id']}/reruns/{rerun['id']}")).json()
    assert done["status"] == "error" and "service stopped" in done["error_message"]
    (finished,) = await _entries(run["id"], "run.rerun_finished")
    assert finished["data"]["status"] == "error"
    assert run["bundle_dir"] in await sweep_bundles(clock.now() + timedelta(days=30))  # then it goes


# --- across processes, and a budget (security review 2026-12-06, D-L5) ---------------------------------
# "One re-run at a time per company" was a look followed by an insert: two requests at once (two API
# processes) both saw none in flight and both queued, and re-runs are not charged, so an auditor could keep
# VMs busy for free. The look and the insert now hold the company's row; and a company has a daily budget.


@pytest.mark.postgres
async def test_two_rerun_requests_at_once_from_two_processes_queue_one(client, demo_db, monkeypatch) -> None:
    """Two admins' requests at once, one in the test's event loop and one in another thread's (two API
    processes in miniature); each waits after its look until the other has looked too, or until the
    database shows the other waiting on the company's row. Without the row lock (the control, first) both
    queue; with it one queues and one is told 409."""
    import asyncio

    from backend.errors import Conflict
    from backend.evidence import rerun as reruns
    from backend.tenancy.context import load_user_context_by_email
    from tests.support.concurrency import _meet_or_see_blocked

    run = await _ran(client, monkeypatch, days=7)
    admin = await load_user_context_by_email(ADMIN)
    looked = reruns._busy_or_spent

    async def ask() -> object:
        try:
            return await reruns.request(admin, run["id"])
        except Conflict as exc:
            return exc.code

    async def two_at_once() -> list[object]:
        arrived: list[int] = []

        async def looked_then_meet(company_id: int):
            why = await looked(company_id)
            await asyncio.to_thread(_meet_or_see_blocked, arrived, demo_db)
            return why

        with monkeypatch.context() as patch:
            patch.setattr(reruns, "_busy_or_spent", looked_then_meet)
            answers = await asyncio.gather(ask(), asyncio.to_thread(asyncio.run, ask()))
        return sorted("queued" if isinstance(a, dict) else a for a in answers)

    async def no_lock(company_id: int) -> None:
        return None

    with monkeypatch.context() as patch:  # the control: the look and the insert, nothing held between
        patch.setattr(reruns.credits, "lock_company", no_lock)
        assert await two_at_once() == ["queued", "queued"]
    assert await EvidenceRerun.count().where(EvidenceRerun.run == run["id"]) == 2
    await EvidenceRerun.delete(force=True)

    assert await two_at_once() == ["queued", "rerun_in_progress"]
    assert await EvidenceRerun.count().where(EvidenceRerun.run == run["id"]) == 1


@pytest.mark.sqlite
async def test_a_companys_daily_rerun_budget_spent_refuses_the_next(client, monkeypatch) -> None:
    from backend.settings import get_settings

    run = await _ran(client, monkeypatch, days=7)
    monkeypatch.setattr(get_settings(), "rerun_daily_budget", 1)
    monkeypatch.setattr("backend.sandbox.run_code", fake_run_code)
    path = f"/api/runs/{run['id']}/reruns"
    await _as(client, ADMIN)
    first = await client.post(path)
    assert first.status_code == 202, first.text
    assert await execute_rerun(first.json()["id"]) == "finished"  # not in flight any more: only the budget
    r = await client.post(path)
    assert r.status_code == 409 and r.json()["error"] == "rerun_budget_spent", r.text
    assert "1 re-runs for evidence in the last 24 hours; the service allows 1 a day" in r.json()["detail"]
    refused = await _entries(run["id"], "run.rerun_refused")
    assert [e["data"]["reason"] for e in refused] == ["rerun_budget_spent"]
    assert await EvidenceRerun.count() == 1
    # control: a budget of two lets the second through (and a day-old re-run no longer counts)
    monkeypatch.setattr(get_settings(), "rerun_daily_budget", 2)
    assert (await client.post(path)).status_code == 202
    second = (
        await EvidenceRerun.select(EvidenceRerun.id).order_by(EvidenceRerun.id, ascending=False).first()
    )["id"]
    assert await execute_rerun(second) == "finished"
    day_old = clock.now() - timedelta(days=1, minutes=1)
    await EvidenceRerun.update({EvidenceRerun.created_at: day_old}).where(EvidenceRerun.id > 0)
    monkeypatch.setattr(get_settings(), "rerun_daily_budget", 1)
    assert (await client.post(path)).status_code == 202
