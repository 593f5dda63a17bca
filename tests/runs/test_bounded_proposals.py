"""Proposals are bounded: a user may have only so many runs waiting for a decision (each holds a staged
bundle of company data), and a run's bundle is deleted when the run ends (a failed run's after its
retention: tests/runs/test_bounded_work.py); proposed changes are still decided against the versions
that were staged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend import execution, sandbox
from backend.actions.tables import ActionItem
from backend.records.tables import Deal
from backend.runs.tables import Run
from backend.sandbox.models import SandboxResult, Timings, VmInfo
from backend.settings import get_settings
from backend.staging.bundle import bundle_root
from backend.tenancy.tables import User
from tests.support.http import approve_as, decide_item_as, login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = [pytest.mark.hardening, pytest.mark.sqlite]


@pytest.fixture
async def on(demo_db: str) -> None:
    await enable_code()


def _bundles() -> set[Path]:
    root = bundle_root()
    return set(root.iterdir()) if root.exists() else set()


async def test_pending_proposals_are_capped_per_user(client, on, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "max_pending_runs_per_user", 2)
    alice = await token_for(client, "alice@acme.example")
    first = await client.post("/api/runs", json=proposal(), headers=alice)
    second = await client.post("/api/runs", json=proposal(), headers=alice)
    assert first.status_code == second.status_code == 201, first.text  # under the cap: accepted
    staged = _bundles()
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_pending_runs"
    assert "the limit is 2" in r.json()["detail"]
    assert _bundles() == staged  # refused before anything was staged
    # another person's assistant is not held back by alice's queue
    bob = await token_for(client, "bob@acme.example")
    assert (await client.post("/api/runs", json=proposal(), headers=bob)).status_code == 201
    # a person's decision frees a place
    client.cookies.clear()
    await login(client, "alice@acme.example")
    assert (await client.post(f"/api/runs/{first.json()['id']}/reject", json={})).status_code == 200
    client.cookies.clear()
    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 201


def _sandbox(status: str, actions: list[dict[str, Any]] | None = None):
    def run_code(code: str, *, input_dir: Path, **_: Any) -> SandboxResult:
        assert (input_dir / "manifest.json").is_file()  # the bundle is there while the run runs
        return SandboxResult(
            status=status,
            exit_code=0 if status == "succeeded" else 1,
            stdout="",
            actions=actions,
            timings_ms=Timings(total=3),
            vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
        )

    return run_code


async def _approved(client, **body: Any) -> dict[str, Any]:
    alice = await token_for(client, "alice@acme.example")
    run = (await client.post("/api/runs", json=proposal(**body), headers=alice)).json()
    r = await approve_as(client, "alice@acme.example", run)
    assert r.status_code == 200, r.text
    client.cookies.clear()
    return (await Run.select().where(Run.id == run["id"]).first()) | {"token": alice}


async def test_a_finished_runs_bundle_is_deleted_and_its_changes_still_decide(
    client, on, monkeypatch
) -> None:
    owner = (await User.select(User.id).where(User.email == "alice@acme.example").first())["id"]
    deal = await Deal.select().where((Deal.owner == owner) & (Deal.visibility == "team")).first()
    change = {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 91}}
    run = await _approved(client)
    bundle = Path(run["bundle_dir"])
    assert (bundle / "record_versions.json").is_file()  # positive control: staged and present until the end
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded", [change]))
    assert await execution.execute(run["id"]) == "succeeded"
    assert not bundle.exists()
    items = (await client.get(f"/api/runs/{run['id']}/action-items", headers=run["token"])).json()
    kept = await ActionItem.select(ActionItem.staged_version).where(ActionItem.run == run["id"])
    assert [k["staged_version"] for k in kept] == [deal["version"]]  # kept in the item, not the bundle
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"], "accept")
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    assert (await Deal.select().where(Deal.id == deal["id"]).first())["probability"] == 91
    stored = await Run.select(Run.manifest, Run.bundle_sha256).where(Run.id == run["id"]).first()
    assert stored["bundle_sha256"] and stored["manifest"]  # what was approved stays on the record


@pytest.mark.parametrize("status", ["failed", "timed_out", "error"])
async def test_a_bundle_is_deleted_whatever_the_end(client, on, monkeypatch, status: str) -> None:
    """Without a retention for failed runs (tests/runs/test_bounded_work.py has the kept case)."""
    monkeypatch.setattr(get_settings(), "failed_bundle_retention_days", 0)
    run = await _approved(client)
    monkeypatch.setattr(sandbox, "run_code", _sandbox(status))
    assert await execution.execute(run["id"]) == status
    assert not Path(run["bundle_dir"]).exists()


async def test_a_run_refused_at_start_loses_its_bundle_too(client, on, monkeypatch) -> None:
    run = await _approved(client)
    bundle = Path(run["bundle_dir"])
    (bundle / "datasets" / "deals.csv").write_text("id,version\n1,1\n")  # changed after approval
    monkeypatch.setattr(sandbox, "run_code", _sandbox("succeeded"))
    assert await execution.execute(run["id"]) == "error"
    assert not bundle.exists()


async def test_a_queued_run_keeps_its_bundle_until_it_runs(client, on) -> None:
    """Positive control: nothing deletes a bundle a run has not used yet."""
    run = await _approved(client)
    assert run["status"] == "queued"
    assert (Path(run["bundle_dir"]) / "manifest.json").is_file()
