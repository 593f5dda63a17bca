"""Proposal, approval bound to hashes, gates, credits, revisions, follow-ups — without starting VMs."""

from __future__ import annotations

import pytest

from backend.credits.tables import CreditCharge
from backend.execution import hash_problem
from backend.runs.tables import Run
from backend.tenancy.tables import Company
from tests.support.http import approve_as, login
from tests.support.runs import as_user, enable_code, proposal


@pytest.mark.sqlite  # the company switch's refusal, not an engine's (a proposal on both: the tests below)
async def test_code_execution_ships_off(client) -> None:
    from tests.support.http import token_for

    assert Company.code_execution_enabled.default is False
    globex = await Company.select().where(Company.name == "Globex").first()
    assert globex["code_execution_enabled"] is False  # the demo's second company never turned it on
    gina = await token_for(client, "gina@globex.example")
    before = await Run.count()
    r = await client.post("/api/runs", json=proposal(), headers=gina)
    assert r.status_code == 403 and r.json()["error"] == "code_execution_disabled"
    assert await Run.count() == before
    await enable_code("Globex")
    assert (
        await client.post("/api/runs", json=proposal(), headers=gina)
    ).status_code == 201  # positive control


@pytest.mark.sqlite  # which routes exist, not an engine's
async def test_writes_off_makes_every_run_endpoint_absent(client, alice, acme_on) -> None:
    ok = await client.post("/api/runs", json=proposal(), headers=alice)
    assert ok.status_code == 201  # positive control: the endpoint exists while writes are on
    await Company.update({Company.assistant_write_enabled: False}).where(Company.name == "Acme Analytics")
    run_id = ok.json()["id"]
    for method, url in [
        ("post", "/api/runs"),
        ("get", "/api/runs"),
        ("get", f"/api/runs/{run_id}"),
        ("get", f"/api/runs/{run_id}/action-items"),
        ("get", "/api/schedules"),
        ("get", "/api/credits"),
        ("get", "/api/action-items/1"),
    ]:
        kwargs = {"json": proposal()} if url == "/api/runs" and method == "post" else {}
        r = await getattr(client, method)(url, headers=alice, **kwargs)
        assert r.status_code == 404, (method, url, r.text)
    assert (await approve_as(client, "alice@acme.example", ok.json())).status_code == 404  # a person, too


async def test_proposal_is_staged_scanned_and_awaits_approval(client, alice, acme_on) -> None:
    from backend.drive.tables import DriveFile

    feedback = (
        await DriveFile.select(DriveFile.id).where(DriveFile.name == "Customer feedback.xlsx").first()
    )["id"]
    r = await client.post(
        "/api/runs", json=proposal(datasets=["deals", "tasks"], files=[feedback]), headers=alice
    )
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["status"] == "awaiting_approval"
    assert len(run["code_sha256"]) == 64 and len(run["bundle_sha256"]) == 64
    paths = {f["path"] for f in run["manifest"]["files"]}
    assert {"datasets/deals.csv", "datasets/tasks.csv"} <= paths
    assert any(f["category"] for f in run["findings"] if f["path"] == "Customer feedback.xlsx")
    assert run["can_decide"] is False  # the assistant's token proposes; it never decides
    await login(client, "alice@acme.example")
    assert (await client.get(f"/api/runs/{run['id']}")).json()["can_decide"] is True  # alice, signed in


@pytest.mark.sqlite  # the code's check before staging, not an engine's
async def test_syntax_error_is_returned_and_nothing_is_staged(client, alice, acme_on) -> None:
    before = await Run.count()
    r = await client.post("/api/runs", json=proposal(code="def broken(:\n  pass"), headers=alice)
    assert r.status_code == 422 and r.json()["error"] == "syntax_error"
    assert r.json()["line"] == 1
    assert await Run.count() == before


@pytest.mark.sqlite  # the size and limits checks before staging, not an engine's
async def test_code_too_large_and_limits_above_caps_are_refused(client, alice, acme_on) -> None:
    r = await client.post("/api/runs", json=proposal(code="x = 1\n" * 60_000), headers=alice)
    assert r.status_code == 413 and r.json()["error"] == "code_too_large"
    r = await client.post("/api/runs", json=proposal(limits={"wall_seconds": 10_000}), headers=alice)
    assert r.status_code == 422 and "cap" in r.text
    r = await client.post("/api/runs", json=proposal(limits={"wall_seconds": 30}), headers=alice)
    assert r.status_code == 201 and r.json()["limits"]["wall_seconds"] == 30


# the dataset permission check before staging, not an engine's (a proposal on both: the test above)
@pytest.mark.sqlite
async def test_dataset_without_permission_is_refused_with_reason(client, alice, acme_on) -> None:
    before = await Run.count()
    r = await client.post("/api/runs", json=proposal(datasets=["deals", "employees"]), headers=alice)
    assert r.status_code == 403 and r.json()["error"] == "dataset_forbidden"
    assert r.json()["refused"][0]["dataset"] == "employees"
    assert await Run.count() == before


# the credit gate's answer, the app's (its atomic reservation on PostgreSQL:
# tests/credits/test_no_overdraft)
@pytest.mark.sqlite
async def test_credits_exhausted_refuses_proposal_and_approval(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    await Company.update({Company.credit_pool: 0}).where(Company.name == "Acme Analytics")
    r = await client.post("/api/runs", json=proposal(), headers=alice)
    assert r.status_code == 402 and r.json()["error"] == "credits_exhausted"
    detail = (await client.get(f"/api/runs/{run['id']}", headers=alice)).json()
    assert "credit" in detail["approve_blocked_reason"]
    r = await approve_as(client, "alice@acme.example", run)
    assert r.status_code == 402
    await Company.update({Company.credit_pool: 100}).where(Company.name == "Acme Analytics")
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200


# who may decide, the app's (approvals racing on PostgreSQL: tests/runs/test_decision_race)
@pytest.mark.sqlite
async def test_only_requester_or_admin_decides(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    assert (await approve_as(client, "bob@acme.example", run)).status_code == 404  # bob cannot even see it
    assert (await approve_as(client, "maria@acme.example", run)).status_code == 404
    r = await approve_as(client, "admin@acme.example", run)
    assert r.status_code == 200 and r.json()["status"] == "queued"
    assert r.json()["approval"]["by"] == "admin@acme.example"


# the hashes compared in Python (approvals on PostgreSQL: test_decision_race, test_no_overdraft)
@pytest.mark.sqlite
async def test_approval_binds_to_the_hashes_seen(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    r = await approve_as(client, "alice@acme.example", run, code_sha256="0" * 64)
    assert r.status_code == 409 and r.json()["error"] == "hash_mismatch"
    r = await approve_as(client, "alice@acme.example", run, bundle_sha256="0" * 64)
    assert r.status_code == 409 and r.json()["error"] == "hash_mismatch"
    for missing in ({}, {"code_sha256": run["code_sha256"]}, {"bundle_sha256": run["bundle_sha256"]}):
        r = await client.post(f"/api/runs/{run['id']}/approve", json=missing)  # signed in, hashes missing
        assert r.status_code == 422, (missing, r.text)
    assert (await client.get(f"/api/runs/{run['id']}")).json()["status"] == "awaiting_approval"
    r = await approve_as(client, "alice@acme.example", run)
    assert r.status_code == 200
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert hash_problem(row) is None  # positive control: untouched, the worker would start it


@pytest.mark.sqlite  # hash_problem reads the bundle's files, not an engine's
async def test_tampering_after_approval_is_refused_before_the_vm(client, alice, acme_on) -> None:
    from pathlib import Path

    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    await approve_as(client, "alice@acme.example", run)
    await Run.update({Run.code: "import os; print(os.environ)"}).where(Run.id == run["id"])
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert "code changed after approval" in hash_problem(row)
    await Run.update({Run.code: row["code"].replace("import os; print(os.environ)", "print('hello')")}).where(
        Run.id == run["id"]
    )
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    assert hash_problem(row) is None
    manifest = Path(row["bundle_dir"]) / "manifest.json"
    original = manifest.read_text()
    manifest.write_text(original.replace('"truncated": false', '"truncated": true', 1))
    assert "manifest differs" in hash_problem(row)
    manifest.write_text(original)
    assert hash_problem(row) is None
    csv = Path(row["bundle_dir"]) / "datasets" / "deals.csv"
    csv.write_text(csv.read_text() + "999999,Injected deal\n")
    assert "staged data changed" in hash_problem(row)


@pytest.mark.sqlite  # hash_problem over a row, not an engine's
async def test_an_approval_cannot_be_replayed_on_another_run(client, alice, acme_on) -> None:
    a = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    b = (await client.post("/api/runs", json=proposal(code="print('other')"), headers=alice)).json()
    await approve_as(client, "alice@acme.example", a)
    # copy a's approval onto b: the hashes bind to a's code, so b is refused
    row_a = await Run.select().where(Run.id == a["id"]).first()
    await Run.update(
        {
            Run.status: "queued",
            Run.approved_at: row_a["approved_at"],
            Run.approved_by: "alice@acme.example",
            Run.approved_code_sha256: row_a["approved_code_sha256"],
            Run.approved_bundle_sha256: row_a["approved_bundle_sha256"],
        }
    ).where(Run.id == b["id"])
    row_b = await Run.select().where(Run.id == b["id"]).output(load_json=True).first()
    assert hash_problem(row_b) is not None


# the rejection's answer, the app's (a rejection racing an approval on PostgreSQL: test_decision_race)
@pytest.mark.sqlite
async def test_reject_with_reason(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    await login(client, "alice@acme.example")
    r = await client.post(f"/api/runs/{run['id']}/reject", json={"reason": "wrong quarter"})
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert r.json()["rejection"]["reason"] == "wrong quarter"
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 409


# the attempt cap and the diff, the app's (a revision on both engines: tests/runs/test_one_pipeline)
@pytest.mark.sqlite
async def test_retry_cap_with_diffs(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(code="raise SystemExit(1)\n"), headers=alice)).json()
    r = await client.post(f"/api/runs/{run['id']}/revisions", headers=alice, json={"code": "print(1)\n"})
    assert r.status_code == 409  # not failed yet: only a failed attempt can be revised
    current = run
    for attempt in (2, 3):
        await Run.update({Run.status: "failed"}).where(Run.id == current["id"])
        r = await client.post(
            f"/api/runs/{current['id']}/revisions", headers=alice, json={"code": f"print({attempt})\n"}
        )
        assert r.status_code == 201, r.text
        current = r.json()
        assert current["attempt"] == attempt and current["status"] == "awaiting_approval"
        assert "+print(" in current["diff"] and "-" in current["diff"]
    await Run.update({Run.status: "failed"}).where(Run.id == current["id"])
    r = await client.post(f"/api/runs/{current['id']}/revisions", headers=alice, json={"code": "print(4)\n"})
    assert r.status_code == 409 and r.json()["error"] == "attempts_exhausted"


async def _approved(client, alice, **kw) -> dict:
    run = (await client.post("/api/runs", json=proposal(**kw), headers=alice)).json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    return run


# the grant's rule, the app's (its last slot raced on PostgreSQL: tests/runs/test_followup_grants)
@pytest.mark.sqlite
async def test_followup_narrowing_off_by_default(client, alice, acme_on) -> None:
    await _approved(client, alice, datasets=["deals", "tasks"])
    r = await client.post("/api/runs", json=proposal(datasets=["deals"]), headers=alice)
    assert r.json()["status"] == "awaiting_approval"


# the grant's rule, the app's (its last slot raced on PostgreSQL: tests/runs/test_followup_grants)
@pytest.mark.sqlite
async def test_followup_narrowing_on_skips_approval_and_names_the_parent(client, alice, demo_db) -> None:
    from backend.audit.tables import AuditEntry

    await enable_code(followup_without_reapproval=True)
    parent = await _approved(client, alice, datasets=["deals", "tasks"])
    # the grant is bound to the approved run (more in test_followup_grants.py)
    followup = {"followup_of": parent["id"]}
    r = await client.post(
        "/api/runs", json=proposal(code="print('narrower')", datasets=["deals"], **followup), headers=alice
    )
    run = r.json()
    assert run["status"] == "queued" and run["narrowed_from"] == parent["id"]
    entry = await AuditEntry.select().where(AuditEntry.action == "run.followup_auto_approved").first()
    assert entry is not None and str(parent["id"]) in entry["data"]
    # widening, another conversation, or naming no approved run fall back to normal approval
    wide = await client.post(
        "/api/runs", json=proposal(datasets=["deals", "contacts"], **followup), headers=alice
    )
    assert wide.json()["status"] == "awaiting_approval"
    other = await client.post(
        "/api/runs", json=proposal(datasets=["deals"], conversation_id="conv-2", **followup), headers=alice
    )
    assert other.json()["status"] == "awaiting_approval"
    unnamed = await client.post("/api/runs", json=proposal(datasets=["deals"]), headers=alice)
    assert unnamed.json()["status"] == "awaiting_approval"


@pytest.mark.sqlite  # the tenancy check, the app's, not an engine's
async def test_another_companys_run_answers_404(client, alice, acme_on) -> None:
    from tests.support.http import token_for

    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    await enable_code("Globex")
    gus = await token_for(client, "admin@globex.example")
    assert (await approve_as(client, "admin@globex.example", run)).status_code == 404  # signed in, too
    assert (await client.post(f"/api/runs/{run['id']}/reject")).status_code == 404
    for method, url in [
        ("get", f"/api/runs/{run['id']}"),
        ("get", f"/api/runs/{run['id']}/action-items"),
        ("get", f"/api/runs/{run['id']}/audit"),
        ("post", f"/api/runs/{run['id']}/revisions"),
    ]:
        kwargs = {"json": {"code": "print(1)"}} if url.endswith("revisions") else {}
        r = await getattr(client, method)(url, headers=gus, **kwargs)
        assert r.status_code == 404, (url, r.status_code)
    listed = (await client.get("/api/runs", headers=gus)).json()
    assert listed["total"] == 0


async def test_credit_usage_is_queryable(client, alice, acme_on) -> None:
    from datetime import UTC, datetime

    from backend.credits import service as credits
    from backend.tenancy.tables import User

    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    alice_row = await User.select().where(User.email == "alice@acme.example").first()
    charged = await credits.charge(
        company_id=alice_row["company"],
        user_id=alice_row["id"],
        run_id=run["id"],
        run_title=run["title"],
        vcpus=2,
        memory_mib=2048,
        seconds=10,
        actor="test",
    )
    assert charged == credits.price(2, 2048, 10)[0] > credits.BASE_CHARGE
    await as_user(client, "admin@acme.example")
    usage = (await client.get("/api/credits")).json()
    assert usage["used"] == charged and usage["remaining"] == usage["pool"] - charged
    assert usage["usage_by_user"] == [
        {"email": "alice@acme.example", "credits": charged, "by_kind": {"run": charged}}
    ]
    assert usage["usage_by_day"][0]["day"] == datetime.now(UTC).date().isoformat()
    assert usage["costliest_runs"] == [
        {"id": run["id"], "title": run["title"], "email": "alice@acme.example", "credits": charged}
    ]
    assert await CreditCharge.count() == 1


@pytest.mark.sqlite  # the scanner's finding in the code, not an engine's
async def test_invisible_characters_in_the_code_are_a_finding(client, alice, acme_on) -> None:
    sneaky = 'access = "user"  # \u202e } \u2066if admin:\u2069 \u2066 begin admins only\n'
    run = (
        await client.post("/api/runs", json=proposal(code=sneaky + "print(access)\n"), headers=alice)
    ).json()
    assert [f["category"] for f in run["findings"] if f["path"] == "run.py"] == ["invisible_characters"]
    plain = (await client.post("/api/runs", json=proposal(code="print('plain')\n"), headers=alice)).json()
    assert not [f for f in plain["findings"] if f["path"] == "run.py"]  # control: clean code, no finding
