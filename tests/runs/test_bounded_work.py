"""Bounded work (issue 15, items 5 and 6): proposals per hour per user and per company, staged bytes on disk
per user and per company (failed runs' kept bundles included), a flow's steps counted as the runs they are,
bundles deleted when runs end (a failed run's after its retention, swept by the worker; runs cancelled at the
gate too), a run charged before anything it wrote is interpreted, and staging's blocking work off the event
loop. Each adversary has its positive control next to it."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from backend import execution, filemodes, sandbox
from backend.actions import service as actions_service
from backend.actions.tables import ActionItem
from backend.credits.tables import CreditCharge
from backend.drive import service as drive
from backend.errors import Invalid
from backend.execution import retention
from backend.flows.tables import Flow
from backend.runs import gates, quotas
from backend.runs.tables import Run
from backend.sandbox.models import OutputFile, SandboxResult, Timings, VmInfo
from backend.settings import get_settings
from backend.staging import service as staging
from backend.staging.bundle import bundle_root
from backend.tenancy.context import load_user_context
from backend.tenancy.tables import Company, User
from tests.support.flows import flow_body, step
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = pytest.mark.hardening


@pytest.fixture
async def on(demo_db: str) -> None:
    await enable_code()


def _bundles() -> set[Path]:
    root = bundle_root()
    return set(root.iterdir()) if root.exists() else set()


async def _approved(client) -> dict[str, Any]:
    alice = await token_for(client, "alice@acme.example")
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    r = await approve_as(client, "alice@acme.example", run)
    assert r.status_code == 200, r.text
    client.cookies.clear()
    return (await Run.select().where(Run.id == run["id"]).first()) | {"token": alice}


def _result(status: str = "succeeded", **extra: Any) -> SandboxResult:
    return SandboxResult(
        status=status,
        exit_code=0 if status == "succeeded" else 1,
        timings_ms=Timings(total=1500),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
        **extra,
    )


def _sandbox(status: str = "succeeded", files: dict[str, bytes] | None = None, **extra: Any):
    """A finished sandbox as the worker sees it: files already in `out_dir`, listed in the result. The claims
    here are about host-side accounting, so a fake result stands in for a VM."""

    def run_code(code: str, *, input_dir: Path, out_dir: Path, **_: Any) -> SandboxResult:
        listed = []
        for name, data in (files or {}).items():
            (out_dir / name).write_bytes(data)
            listed.append(OutputFile(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
        return _result(status, files=listed, **extra)

    return run_code


# ---------------------------------------------------------------- proposals per hour


@pytest.mark.sqlite
async def test_proposals_per_hour_are_limited_per_user(client, on, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "max_proposals_per_user_per_hour", 2)
    alice = await token_for(client, "alice@acme.example")
    first = await client.post("/api/runs", json=proposal(), headers=alice)
    second = await client.post("/api/runs", json=proposal(), headers=alice)
    assert first.status_code == second.status_code == 201, first.text  # positive control: under the limit
    staged = _bundles()
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["error"] == "too_many_proposals"
    assert body["scope"] == "user" and body["limit"] == 2
    assert "2 runs in the last hour" in body["detail"]
    assert _bundles() == staged  # refused before anything was staged
    # a rejection does not give the hour back (the proposal was staged all the same) ...
    await login(client, "alice@acme.example")
    assert (await client.post(f"/api/runs/{first.json()['id']}/reject", json={})).status_code == 200
    client.cookies.clear()
    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 429
    # ... a revision is a proposal too ...
    r = await client.post(
        f"/api/runs/{first.json()['id']}/revisions", json={"code": "print(2)"}, headers=alice
    )
    assert r.status_code in (409, 429)  # a rejected run cannot be revised at all; never a 201
    # ... another user is not held back by alice's hour ...
    bob = await token_for(client, "bob@acme.example")
    assert (await client.post("/api/runs", json=proposal(), headers=bob)).status_code == 201
    # ... and proposals older than an hour no longer count
    old = datetime.now(UTC) - timedelta(hours=1, minutes=1)
    await Run.update({Run.created_at: old}).where(Run.id.is_in([first.json()["id"], second.json()["id"]]))
    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 201


@pytest.mark.sqlite
async def test_proposals_per_hour_are_limited_per_company(client, on, monkeypatch) -> None:
    alice = await token_for(client, "alice@acme.example")
    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    seeded = await Run.count().where(Run.company == acme)  # the demo's waiting run, proposed just now
    monkeypatch.setattr(get_settings(), "max_proposals_per_company_per_hour", seeded + 3)
    bob = await token_for(client, "bob@acme.example")
    for headers in (alice, alice, bob):
        r = await client.post("/api/runs", json=proposal(), headers=headers)
        assert r.status_code == 201, r.text
    r = await client.post("/api/runs", json=proposal(), headers=bob)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_proposals" and r.json()["scope"] == "company"
    # positive control: another company's proposals are its own
    globex = (await Company.select(Company.id).where(Company.name == "Globex").first())["id"]
    someone = await User.select(User.id).where(User.company == globex).first()
    await quotas.check_rate(await load_user_context(someone["id"]))  # does not raise


@pytest.mark.sqlite
async def test_a_schedules_firings_are_not_proposals(client, on, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "max_proposals_per_user_per_hour", 1)
    alice = await token_for(client, "alice@acme.example")
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    await Run.update({Run.schedule_id: 1}).where(Run.id == run["id"])  # as a firing is saved
    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 201


@pytest.mark.sqlite
async def test_a_flows_steps_count_against_the_pending_cap(client, on, monkeypatch) -> None:
    """Adversary: a flow of up to 10 steps, each a run with a bundle waiting for a decision, checked as if
    it were one proposal. Its steps are counted: a flow that would go over the cap is refused before
    anything is staged; a smaller one at the same point fits (the control)."""
    alice = await token_for(client, "alice@acme.example")
    await client.post("/api/runs", json=proposal(), headers=alice)  # alice has runs waiting already
    user = (await Run.select(Run.requested_by).order_by(Run.id, ascending=False).first())["requested_by"]
    waiting = await Run.count().where((Run.requested_by == user) & (Run.status == "awaiting_approval"))
    monkeypatch.setattr(get_settings(), "max_pending_runs_per_user", waiting + 2)  # room for two runs
    staged, flows = _bundles(), await Flow.count()
    r = await client.post("/api/flows", json=flow_body(step(), step(), step()), headers=alice)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_pending_runs"
    assert f"this flow's 3 steps would make {waiting + 3} (the limit is {waiting + 2})" in r.json()["detail"]
    assert _bundles() == staged and await Flow.count() == flows  # refused before anything was staged
    # positive control: a 1-step flow at the same point fits, and then a 2-step one no longer does
    assert (await client.post("/api/flows", json=flow_body(step()), headers=alice)).status_code == 201
    assert (await client.post("/api/flows", json=flow_body(step(), step()), headers=alice)).status_code == 429
    assert (await client.post("/api/flows", json=flow_body(step()), headers=alice)).status_code == 201


@pytest.mark.sqlite
async def test_a_flows_steps_count_against_the_proposals_per_hour(client, on, monkeypatch) -> None:
    alice = await token_for(client, "alice@acme.example")
    first = await client.post("/api/runs", json=proposal(), headers=alice)
    user = (await Run.select(Run.requested_by).where(Run.id == first.json()["id"]).first())["requested_by"]
    since = datetime.now(UTC) - timedelta(hours=1)
    made = await Run.count().where(
        (Run.requested_by == user) & (Run.created_at >= since) & Run.schedule_id.is_null()
    )
    monkeypatch.setattr(get_settings(), "max_proposals_per_user_per_hour", made + 2)
    staged = _bundles()
    r = await client.post("/api/flows", json=flow_body(step(), step(), step()), headers=alice)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_proposals" and r.json()["scope"] == "user"
    assert f"this flow's 3 steps would make {made + 3}" in r.json()["detail"]
    assert _bundles() == staged
    # positive control: a 1-step flow at the same point fits
    assert (await client.post("/api/flows", json=flow_body(step()), headers=alice)).status_code == 201


# ---------------------------------------------------------------- staged bytes in flight


@pytest.mark.sqlite
async def test_staged_bytes_in_flight_are_limited_per_company(client, on, monkeypatch) -> None:
    alice = await token_for(client, "alice@acme.example")
    company = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    await Run.delete().where(Run.company == company)  # the demo's waiting run: start from nothing in flight
    assert await quotas.staged_in_flight(company) == 0
    first = await client.post("/api/runs", json=proposal(), headers=alice)
    assert first.status_code == 201, first.text
    size = quotas.bundle_bytes((await Run.select(Run.manifest).where(Run.id == first.json()["id"]).output(load_json=True).first())["manifest"])  # fmt: skip
    assert size > 0
    assert await quotas.staged_in_flight(company) == size
    # room for one bundle and a half: the second one would go over, and is deleted again once staged
    monkeypatch.setattr(get_settings(), "max_staged_bytes_per_company", size + size // 2)
    staged = _bundles()
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["error"] == "too_much_staged_data"
    assert body["in_flight_bytes"] == size and body["bundle_bytes"] == size, body
    assert _bundles() == staged  # the bundle it staged is gone
    assert await Run.count() == 1
    # another user of the company is held back too: the limit is the company's
    bob = await token_for(client, "bob@acme.example")
    assert (await client.post("/api/runs", json=proposal(), headers=bob)).status_code == 429
    # at the limit already: refused before staging
    monkeypatch.setattr(get_settings(), "max_staged_bytes_per_company", size)
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 429 and r.json()["bundle_bytes"] == 0
    # positive control: once the first run is decided, its bytes are no longer in flight
    await login(client, "alice@acme.example")
    assert (await client.post(f"/api/runs/{first.json()['id']}/reject", json={})).status_code == 200
    client.cookies.clear()
    assert await quotas.staged_in_flight(company) == 0
    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 201
    assert await quotas.staged_in_flight(company) == size


async def _acme_from_nothing_staged() -> int:
    """Acme's id, with its demo runs gone: nothing of it on disk counts."""
    company = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    await Run.delete().where(Run.company == company)
    assert await quotas.staged_in_flight(company) == 0
    return company


async def _size(run_id: int) -> int:
    row = await Run.select(Run.manifest).where(Run.id == run_id).output(load_json=True).first()
    return quotas.bundle_bytes(row["manifest"])


@pytest.mark.sqlite
async def test_staged_bytes_on_disk_are_limited_per_user(client, on, monkeypatch) -> None:
    """Adversary: one user's assistant staging until it holds the whole company's allowance (blocking every
    colleague). The per-user limit refuses it first; a colleague's proposal still fits (the control)."""
    assert get_settings().max_staged_bytes_per_user == get_settings().max_staged_bytes_per_company // 2
    alice = await token_for(client, "alice@acme.example")
    company = await _acme_from_nothing_staged()
    first = await client.post("/api/runs", json=proposal(), headers=alice)
    assert first.status_code == 201, first.text
    size = await _size(first.json()["id"])
    monkeypatch.setattr(get_settings(), "max_staged_bytes_per_user", size + size // 2)
    staged = _bundles()
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["error"] == "too_much_staged_data" and body["scope"] == "user", body
    assert body["in_flight_bytes"] == size and body["bundle_bytes"] == size
    assert body["detail"].startswith("your runs") and "per user" in body["detail"]
    assert _bundles() == staged  # the bundle it staged is gone
    assert await Run.count() == 1
    # positive control: bob, in the same company and far under its limit, is not held back by alice's bytes
    bob = await token_for(client, "bob@acme.example")
    theirs = await client.post("/api/runs", json=proposal(), headers=bob)
    assert theirs.status_code == 201, theirs.text
    assert await quotas.staged_in_flight(company) == size + await _size(
        theirs.json()["id"]
    )  # bob sees other rows
    alice_id = (await Run.select(Run.requested_by).where(Run.id == first.json()["id"]).first())[
        "requested_by"
    ]
    assert await quotas.staged_in_flight(company, alice_id) == size


@pytest.mark.sqlite
async def test_a_failed_runs_kept_bundle_counts_until_it_is_swept(client, on, monkeypatch) -> None:
    """Adversary: runs made to fail keep their bundles on disk for days (for a revision), out of any count
    of runs in flight. They hold staged bytes as much as a waiting run does, until the sweep deletes them."""
    company = await _acme_from_nothing_staged()
    run = await _approved(client)
    size = await _size(run["id"])
    monkeypatch.setattr(sandbox, "run_code", _sandbox("failed"))
    assert await execution.execute(run["id"]) == "failed"
    assert Path(run["bundle_dir"]).is_dir()  # kept for its retention
    assert await quotas.staged_in_flight(company) == size
    monkeypatch.setattr(get_settings(), "max_staged_bytes_per_company", size + size // 2)
    r = await client.post("/api/runs", json=proposal(), headers=run["token"])
    assert r.status_code == 429, r.text
    assert r.json()["in_flight_bytes"] == size and r.json()["scope"] == "company"
    # positive control: once the sweep deleted it, the failed run holds nothing on disk
    assert run["bundle_dir"] in await retention.sweep_bundles(datetime.now(UTC) + timedelta(days=8))
    assert await quotas.staged_in_flight(company) == 0
    assert (await client.post("/api/runs", json=proposal(), headers=run["token"])).status_code == 201


@pytest.mark.sqlite
async def test_a_flows_bundles_add_up_against_the_staged_bytes(client, on, monkeypatch) -> None:
    """Adversary: a flow of several steps, each bundle under the limit alone, together over it (the earlier
    steps' bundles are not saved yet while the later ones stage). Nothing of it is kept."""
    alice = await token_for(client, "alice@acme.example")
    await _acme_from_nothing_staged()
    one = await client.post("/api/runs", json=proposal(), headers=alice)  # what a step staging `deals` holds
    size = await _size(one.json()["id"])
    await Run.delete().where(Run.id == one.json()["id"])
    monkeypatch.setattr(get_settings(), "max_staged_bytes_per_company", size + size // 2)
    staged, flows = _bundles(), await Flow.count()
    r = await client.post("/api/flows", json=flow_body(step(), step()), headers=alice)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_much_staged_data" and r.json()["step"] == 2
    assert r.json()["in_flight_bytes"] == 0 and r.json()["bundle_bytes"] == 2 * size
    assert _bundles() == staged and await Flow.count() == flows  # step 1's bundle went too
    # positive control: one step of it fits
    assert (await client.post("/api/flows", json=flow_body(step()), headers=alice)).status_code == 201


def test_bundle_bytes_reads_only_sizes() -> None:
    manifest = {"files": [{"bytes": 10}, {"bytes": 5}, {"bytes": -3}, {"bytes": True}, {"bytes": "9"}, "x"]}
    assert quotas.bundle_bytes(manifest) == 15
    assert quotas.bundle_bytes(None) == quotas.bundle_bytes({}) == 0


# ---------------------------------------------------------------- retention


@pytest.mark.sqlite
@pytest.mark.parametrize("status", ["failed", "timed_out", "error"])
async def test_a_failed_runs_bundle_is_kept_for_its_retention_then_swept(
    client, on, monkeypatch, status: str
) -> None:
    run = await _approved(client)
    bundle = Path(run["bundle_dir"])
    monkeypatch.setattr(sandbox, "run_code", _sandbox(status))
    assert await execution.execute(run["id"]) == status
    assert (bundle / "manifest.json").is_file()  # kept: the run may be revised
    now = datetime.now(UTC)
    # (the bundle folder is shared by every test's database: other tests' bundles are orphans here)
    assert str(bundle) not in await retention.sweep_bundles(now + timedelta(days=6))  # inside the 7 days
    assert bundle.exists()
    assert str(bundle) in await retention.sweep_bundles(now + timedelta(days=7, minutes=1))
    assert not bundle.exists()
    row = await Run.select(Run.manifest, Run.bundle_sha256).where(Run.id == run["id"]).first()
    assert row["manifest"] and row["bundle_sha256"]  # the manifest and hashes stay on the record


@pytest.mark.sqlite
async def test_a_succeeded_runs_bundle_goes_at_once(client, on, monkeypatch) -> None:
    run = await _approved(client)
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded"))
    assert await execution.execute(run["id"]) == "succeeded"
    assert not Path(run["bundle_dir"]).exists()


@pytest.mark.sqlite
async def test_the_sweep_keeps_what_is_in_flight_and_young_orphans(client, on) -> None:
    alice = await token_for(client, "alice@acme.example")
    waiting = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    queued = await _approved(client)
    root = bundle_root()
    young, old = root / "young-orphan", root / "old-orphan"
    young.mkdir()
    old.mkdir()
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    swept = await retention.sweep_bundles(datetime.now(UTC) + timedelta(hours=1))
    assert str(old) in swept  # a bundle no run names, a day old: a proposal that died while staging
    waiting_dir = (await Run.select(Run.bundle_dir).where(Run.id == waiting["id"]).first())["bundle_dir"]
    for directory in (waiting_dir, queued["bundle_dir"], young):
        assert Path(directory).is_dir() and str(directory) not in swept
    # far in the future, still in flight: nothing waiting or queued is ever swept
    await retention.sweep_bundles(datetime.now(UTC) + timedelta(days=365))
    assert Path(waiting_dir).is_dir() and Path(queued["bundle_dir"]).is_dir()


@pytest.mark.sqlite
async def test_a_run_cancelled_at_the_gate_loses_its_bundle(client, on, monkeypatch) -> None:
    """Both ways: the gate closing cancels the queued run, or the worker's re-check refuses it."""
    run = await _approved(client)
    other = await _approved(client)
    assert Path(run["bundle_dir"]).is_dir() and Path(other["bundle_dir"]).is_dir()  # positive control
    assert await gates.cancel_queued(run["company"], gates.CODE_EXECUTION_OFF, actor="test") == [
        run["id"],
        other["id"],
    ]
    assert not Path(run["bundle_dir"]).exists() and not Path(other["bundle_dir"]).exists()
    # the worker's own re-check: the switch went off without the hook (another process)
    await enable_code()
    third = await _approved(client)
    await Company.update({Company.code_execution_enabled: False}).where(Company.id == third["company"])
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded"))
    assert await execution.execute(third["id"]) == "cancelled"
    assert not Path(third["bundle_dir"]).exists()


@pytest.mark.sqlite
async def test_a_run_refused_at_start_loses_its_bundle_though_its_status_is_error(
    client, on, monkeypatch
) -> None:
    run = await _approved(client)
    bundle = Path(run["bundle_dir"])
    (bundle / "datasets" / "deals.csv").write_text("id,version\n1,1\n")  # changed after approval
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded"))
    assert await execution.execute(run["id"]) == "error"
    assert not bundle.exists()  # not kept for a revision: nothing ran on it


@pytest.mark.sqlite
async def test_the_worker_sweeps_at_start(client, on, monkeypatch) -> None:
    calls = []

    async def sweep() -> list[str]:
        calls.append(1)
        return []

    monkeypatch.setattr("backend.execution.loop.sweep_bundles", sweep)
    monkeypatch.setattr("backend.execution.loop.service_standby_count", lambda: 0)
    w = execution.loop.RunLoop(poll_seconds=3600)
    await w.start()
    try:
        assert calls == [1]
    finally:
        await w.stop()


# ---------------------------------------------------------------- charged before interpreting outputs


HOSTILE_ACTION = {"op": "update", "dataset": "deals", "record_id": 2**80, "changes": {"probability": 5}}


async def _charges(run_id: int) -> list[dict[str, Any]]:
    return await CreditCharge.select().where(CreditCharge.run_id == run_id)


async def test_the_hostile_outputs_really_raise_where_they_are_interpreted(client, on) -> None:
    """The adversary is real: each of these raises in the code that interprets outputs (before this
    change it raised ahead of the charge, so such a run was never charged)."""
    run = await _approved(client)
    requester = await load_user_context(run["requested_by"])
    with pytest.raises(Invalid):
        await drive.upload(requester, "   ", b"x")
    with pytest.raises(Exception):  # noqa: B017 - OverflowError on SQLite, a DataError on PostgreSQL
        await actions_service.ingest(
            await Run.select().where(Run.id == run["id"]).output(load_json=True).first(),
            [HOSTILE_ACTION],
            requester,
        )


async def test_a_run_with_hostile_outputs_is_charged_exactly_once(client, on, monkeypatch) -> None:
    run = await _approved(client)
    files = {"   ": b"blank name", "report.csv": b"a,b\n1,2\n"}
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded", files, actions=[HOSTILE_ACTION]))
    assert await execution.execute(run["id"]) == "succeeded"
    charges = await _charges(run["id"])
    assert len(charges) == 1
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert row["credits_charged"] == pytest.approx(charges[0]["credits"]) and row["credits_charged"] > 0
    assert row["finished_at"] is not None
    rejected = {r["name"]: r["reason"] for r in row["result"]["rejected_files"]}
    assert "not stored" in rejected["   "]  # the blank name is listed, not stored
    stored = [f["name"] for f in row["result"]["files"]]
    assert stored == ["report.csv"]  # the good output next to it is kept
    assert "none were kept" in row["actions_note"]  # actions.json became no items, all or nothing
    assert await ActionItem.count().where(ActionItem.run == run["id"]) == 0


async def test_positive_control_a_normal_run_is_charged_once(client, on, monkeypatch) -> None:
    run = await _approved(client)
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded", {"report.csv": b"a\n1\n"}))
    assert await execution.execute(run["id"]) == "succeeded"
    assert len(await _charges(run["id"])) == 1
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert [f["name"] for f in row["result"]["files"]] == ["report.csv"] and row["output_folder_id"]
    assert row["result"]["rejected_files"] == [] and row["actions_note"] is None


@pytest.mark.sqlite
async def test_a_failure_storing_outputs_still_ends_the_run_charged_once(client, on, monkeypatch) -> None:
    run = await _approved(client)
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded", {"report.csv": b"a\n1\n"}))

    async def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("drive is down")

    monkeypatch.setattr(drive, "create_folder", broken)
    assert await execution.execute(run["id"]) == "error"
    assert len(await _charges(run["id"])) == 1
    row = await Run.select().where(Run.id == run["id"]).first()
    assert row["status"] == "error" and "could not be stored" in row["error_message"]
    assert row["credits_charged"] > 0


# ---------------------------------------------------------------- staging off the event loop


@pytest.mark.sqlite
async def test_staging_writes_and_hashes_off_the_event_loop(client, on, monkeypatch) -> None:
    loop_thread = threading.current_thread()
    threads: list[threading.Thread] = []
    real_write, real_private = staging._write, filemodes.write_private

    def write(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return real_write(*args)

    def write_private(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return real_private(*args)

    monkeypatch.setattr(staging, "_write", write)
    monkeypatch.setattr(filemodes, "write_private", write_private)
    alice = await token_for(client, "alice@acme.example")
    upload = await client.post(
        "/api/drive/files", files={"file": ("notes.txt", b"hello\n", "text/plain")}, headers=alice
    )
    assert upload.status_code == 201, upload.text
    r = await client.post("/api/runs", json=proposal(files=[upload.json()["id"]]), headers=alice)
    assert r.status_code == 201, r.text
    assert len(threads) >= 4  # the export, the Drive file, the versions, the README, the manifest
    assert loop_thread not in threads
