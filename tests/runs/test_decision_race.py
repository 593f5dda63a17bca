"""An approval and a rejection of the same run sent at once (one person double-clicking both, or two people
deciding together): exactly one lands, the other is told 409 and changes nothing, and the audit trail says
what the run's state says. Both requests are held until each has read the run as still waiting, the widest
window there is. The control shows the race test itself would notice an unconditional write."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.runs import approval
from backend.runs import service as runs
from backend.runs.tables import Run, RunStatus
from tests.support.concurrency import concurrent_client, meet_after
from tests.support.http import login
from tests.support.runs import proposal

ROUNDS = 20


async def _decide_at_once(client: Any, token: dict[str, str]) -> tuple[list[int], str, list[str], bool]:
    """Propose a run with the assistant's token, then send its approval and its rejection together, signed
    in as alice. Returns the two status codes, the run's final status, its decision entries in the audit
    trail, and whether its staged bundle is still on disk."""
    r = await client.post("/api/runs", json=proposal(), headers=token)
    assert r.status_code == 201, r.text
    run = r.json()
    async with concurrent_client(client) as people:
        approve, reject = await asyncio.gather(
            people.post(
                f"/api/runs/{run['id']}/approve",
                json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
            ),
            people.post(f"/api/runs/{run['id']}/reject", json={"reason": "not now"}),
        )
    row = await Run.select(Run.status, Run.bundle_dir).where(Run.id == run["id"]).first()
    entries = await AuditEntry.select(AuditEntry.action).where(
        (AuditEntry.subject_type == "run") & (AuditEntry.subject_id == str(run["id"]))
    )
    decisions = [e["action"] for e in entries if e["action"] in ("run.approved", "run.rejected")]
    return (
        [approve.status_code, reject.status_code],
        row["status"],
        decisions,
        Path(row["bundle_dir"]).exists(),
    )


async def test_reject_racing_approve_has_one_winner_and_the_audit_agrees(
    client, alice, acme_on, monkeypatch
) -> None:
    meet_after(monkeypatch, runs, "get_run_row", 2)
    await login(client, "alice@acme.example")
    for _ in range(ROUNDS):
        codes, status, decisions, bundle_kept = await _decide_at_once(client, alice)
        assert sorted(codes) == [200, 409], codes
        if codes[0] == 200:  # the approval won: the run waits for the worker with its bundle
            assert status == RunStatus.queued and decisions == ["run.approved"] and bundle_kept
        else:  # the rejection won: nothing approved, nothing runs
            assert status == RunStatus.rejected and decisions == ["run.rejected"] and not bundle_kept
    assert (await audit.verify_company(await _acme_id())).ok  # the entries of every round chain up


async def test_control_an_unconditional_decision_is_caught_by_the_same_race(
    client, alice, acme_on, monkeypatch
) -> None:
    """Control: with the claim's condition removed (the code before this fix wrote the rejection whatever
    the run's state), the same race answers 200 twice and the trail disagrees with the run."""

    async def unconditional(run_id: int, values: dict[Any, Any]) -> None:
        await Run.update(values).where(Run.id == run_id)

    monkeypatch.setattr(approval, "_claim", unconditional)  # the one decision module's claim
    meet_after(monkeypatch, runs, "get_run_row", 2)
    await login(client, "alice@acme.example")
    codes, status, decisions, _ = await _decide_at_once(client, alice)
    assert codes == [200, 200]
    assert sorted(decisions) == ["run.approved", "run.rejected"]


async def _acme_id() -> int:
    from backend.tenancy.tables import Company

    return (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
