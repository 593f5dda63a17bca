"""What a run made is its contents, names included (review 2026-12-06, D-L1 and the "Low 4" row).

The hostile party is the run's code: it names its output after a secret value of the HR data it staged, has
a file refused with the secret in the reason, and ends with the secret in its error text. A reader who may
not see what the run computed from - its requester once the HR permission is taken away, an auditor (no HR
permission) - must find neither the names, the reason, the error text nor the output's sha256 (a one-number
file is confirmed from its hash) in the run's detail, evidence pack, audit entries and export, timeline,
re-run view or action items. Positive controls: the requester while she holds the permission, and a company admin, read
all of them; the same views, so the test notices the rule being taken out of any one of them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from backend import clock, execution, sandbox
from backend.actions.tables import ActionItem
from backend.audit import service as audit
from backend.evidence import rerun as rerun_policy
from backend.evidence.tables import EvidenceRerun
from backend.runs.tables import Run
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import PermissionSet, User, UserPermissionSet
from tests.support.audit import make_auditor
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = pytest.mark.sqlite  # a rule of the service, not of the database's

HANNAH = "hannah@acme.example"  # HR: stages employees
AUDITOR = "frank@acme.example"  # Finance: no HR permission
ADMIN = "admin@acme.example"
SECRET = "ceo-salary-417500"
OUTPUT = f"{SECRET}.csv"
BODY = b"417500\n"  # a one-number file: its sha256 alone confirms a guess
DIGEST = hashlib.sha256(BODY).hexdigest()
PRIVATE = (SECRET, DIGEST)


def run_code(code: str, *, out_dir: Path, **_: Any) -> Any:
    """The guest: one output named after the secret, one refused file and its reason, and its error text."""
    from backend.sandbox.models import OutputFile, RejectedFile, SandboxResult, Timings, VmInfo

    (out_dir / OUTPUT).write_bytes(BODY)
    return SandboxResult(
        status="failed",
        exit_code=1,
        stdout="done\n",
        files=[OutputFile(name=OUTPUT, size=len(BODY), sha256=DIGEST)],
        rejected_files=[
            RejectedFile(name=f"{SECRET}.bin", reason=f"not a kept type: {SECRET}"),
            RejectedFile(
                name="actions.json", reason=f"not valid JSON near {SECRET}"
            ),  # the run's actions_note
        ],
        error=f"Traceback: KeyError {SECRET}",
        timings_ms=Timings(total=800),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
    )


async def hannahs_run(client: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """Hannah's run over employees, executed (through the real result path: Drive, run.finished), with one
    accepted change it proposed and a finished re-run for evidence."""
    await enable_code(evidence_retention_days=30)
    monkeypatch.setattr(sandbox, "run_code", run_code)
    asked = proposal(datasets=["employees", "tasks"])
    r = await client.post("/api/runs", json=asked, headers=await token_for(client, HANNAH))
    assert r.status_code == 201, r.text
    run = r.json()
    assert (await approve_as(client, HANNAH, run)).status_code == 200
    client.cookies.clear()
    assert await execution.execute(run["id"]) == "failed"
    row = await Run.select(Run.company, Run.result).where(Run.id == run["id"]).output(load_json=True).first()
    item = ActionItem(
        company=row["company"],
        run=run["id"],
        index=0,
        op="update",
        dataset="employees",
        record_id=1,
        changes={"title": SECRET},
        before={"title": f"before {SECRET}"},
        reason="raise",
        status="accepted",
        decided_by=HANNAH,
    )
    await item.save()
    outcome = rerun_policy.outcome_of(run_code("", out_dir=tmp_path))
    await EvidenceRerun(
        run=run["id"],
        company=row["company"],
        requested_by=(await User.select(User.id).where(User.email == ADMIN).first())["id"],
        actor=ADMIN,
        status="finished",
        created_at=clock.now(),
        finished_at=clock.now(),
        outcome=outcome,
        comparison=rerun_policy.compare(row["result"], outcome),
    ).save()
    return {**run, "item_id": item.id}


async def revoke_hr(email: str) -> None:
    user = await User.select(User.id, User.company).where(User.email == email).first()
    hr = await PermissionSet.select(PermissionSet.id).where(
        (PermissionSet.name == "HR") & (PermissionSet.company == user["company"])
    )
    await UserPermissionSet.delete().where(
        (UserPermissionSet.user == user["id"]) & (UserPermissionSet.permission_set == hr[0]["id"])
    )
    assert not (await load_user_context_by_email(email)).can("employees")


async def views(client: Any, email: str, run_id: int, *, reviewer: bool = False) -> dict[str, str]:
    """Every view of the run `email` may open, as text."""
    client.cookies.clear()
    await login(client, email)
    paths = [
        f"/api/runs/{run_id}",
        f"/api/runs/{run_id}/evidence",
        f"/api/runs/{run_id}/evidence/html",
        f"/api/runs/{run_id}/audit",
        f"/api/runs/{run_id}/action-items",
    ]
    if reviewer:
        paths += [
            f"/api/audit?run={run_id}",
            f"/api/audit/runs/{run_id}/timeline",
            f"/api/runs/{run_id}/reruns",
            "/api/audit?action=drive.uploaded",
            "/api/audit/export",  # the names as contents: a digest in their place for the auditor
        ]
    seen = {}
    for path in paths:
        r = await client.get(path)
        assert r.status_code == 200, (path, r.text)
        seen[path] = r.text
    client.cookies.clear()
    return seen


def leaks(seen: dict[str, str]) -> list[tuple[str, str]]:
    return [(path, secret) for path, text in seen.items() for secret in PRIVATE if secret in text]


async def test_a_runs_output_names_hashes_and_errors_follow_the_permission(
    client, monkeypatch, tmp_path
) -> None:
    run = await hannahs_run(client, monkeypatch, tmp_path)
    rid = run["id"]

    # positive control: Hannah, holding HR, reads what her run made in every view
    mine = await views(client, HANNAH, rid)
    assert {path for path, _ in leaks(mine)} == set(mine)
    assert all(DIGEST in mine[p] for p in (f"/api/runs/{rid}", f"/api/runs/{rid}/evidence"))
    client.cookies.clear()
    await login(client, HANNAH)
    assert SECRET in (await client.get(f"/api/runs/{rid}")).json()["actions_note"]

    # a company admin reads them too, in the reviewer's views
    admin = await views(client, ADMIN, rid, reviewer=True)
    assert {path for path, _ in leaks(admin)} == set(admin)

    # the auditor (no HR): the run's history, none of what it made
    await make_auditor(client)
    seen = await views(client, AUDITOR, rid, reviewer=True)
    assert leaks(seen) == []
    assert '"outputs_withheld":"withheld' in seen[f"/api/runs/{rid}/evidence"].replace(" ", "")

    # Hannah after losing HR: the same views hold nothing of it
    await revoke_hr(HANNAH)
    after = await views(client, HANNAH, rid)
    assert leaks(after) == []
    client.cookies.clear()
    await login(client, HANNAH)
    detail = (await client.get(f"/api/runs/{rid}")).json()
    assert detail["withheld"] and detail["status"] == "failed"
    assert detail["error_message"] == detail["actions_note"] == f"[{detail['withheld']}]"
    (item,) = (await client.get(f"/api/runs/{rid}/action-items")).json()
    assert item["values_withheld"] and item["changes"] == {} and item["before"] is None
    trail = (await client.get(f"/api/runs/{rid}/audit")).json()
    finished = next(e for e in trail if e["action"] == "run.finished")
    assert {"outputs", "rejected_files"} <= set(finished["data_withheld"]) and finished["data"]["status"]


async def test_a_requester_who_lost_the_permission_cannot_accept_what_she_can_no_longer_read(
    client, monkeypatch, tmp_path
) -> None:
    run = await hannahs_run(client, monkeypatch, tmp_path)
    acme = (await Run.select(Run.company).where(Run.id == run["id"]).first())["company"]
    pending = []
    for index in (1, 2):
        item = ActionItem(
            company=acme,
            run=run["id"],
            index=index,
            op="create",
            dataset="tasks",  # a dataset she still edits: the values come from employees all the same
            changes={"title": f"{SECRET} {index}", "status": "open"},
            reason="new",
            status="pending",
        )
        await item.save()
        pending.append(item.id)
    await revoke_hr(HANNAH)
    client.cookies.clear()
    await login(client, HANNAH)
    refused = await client.post(f"/api/action-items/{pending[0]}/accept")
    assert refused.status_code == 403 and "employees" in refused.text and SECRET not in refused.text
    status = await ActionItem.select(ActionItem.status).where(ActionItem.id == pending[0]).first()
    assert status["status"] == "pending"
    entries = await audit.search(acme, action="action.refused", subject_id=str(pending[0]))
    assert len(entries) == 1
    # control: an admin, who reads employees, sees the values of the other and accepts it
    client.cookies.clear()
    await login(client, ADMIN)
    shown = (await client.get(f"/api/action-items/{pending[1]}")).json()
    assert shown["changes"]["title"] == f"{SECRET} 2" and not shown["values_withheld"]
    accepted = await client.post(f"/api/action-items/{pending[1]}/accept")
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted", accepted.text
