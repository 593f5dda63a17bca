"""Follow-ups without re-approval stay narrow and visible: the right is a grant made by a person's approval
of one run, bound to that run (not to a conversation id the assistant picks), limited in time and count,
and only for a subset of its scope. Every attack is made with the assistant's token; each has a positive
control that passes through the same door."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from backend.actions import service as actions
from backend.audit.tables import AuditEntry
from backend.drive.tables import DriveFile
from backend.records.tables import Deal
from backend.runs import followups
from backend.runs.tables import Run
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company, User
from tests.support.concurrency import concurrent_client, meet_after
from tests.support.http import login, token_for
from tests.support.runs import enable_code, proposal


async def _approve(client, email: str, run: dict) -> dict:
    """A person approves, signed in (session cookie), sending the hashes shown on the approval screen."""
    await login(client, email)
    r = await client.post(
        f"/api/runs/{run['id']}/approve",
        json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
    )
    client.cookies.clear()
    assert r.status_code == 200, r.text
    return r.json()


async def _propose(client, token: dict, **kw) -> dict:
    r = await client.post("/api/runs", json=proposal(**kw), headers=token)
    assert r.status_code == 201, r.text
    return r.json()


async def _feedback_file() -> int:
    row = await DriveFile.select(DriveFile.id).where(DriveFile.name == "Customer feedback.xlsx").first()
    return row["id"]


async def _parent(client, token: dict, email: str = "alice@acme.example", **kw) -> dict:
    """A run the assistant proposed and its person approved: the source of a follow-up grant."""
    kw.setdefault("datasets", ["deals", "tasks"])
    return await _approve(client, email, await _propose(client, token, **kw))


async def _followup(client, token: dict, parent: dict, **kw) -> dict:
    kw.setdefault("code", "print('a narrower question')")
    kw.setdefault("datasets", ["deals"])
    kw.setdefault("conversation_id", parent["conversation_id"])
    return await _propose(client, token, followup_of=parent["id"], **kw)


async def _on(**extra) -> None:
    await enable_code(followup_without_reapproval=True, **extra)


def _queued_from(run: dict, parent: dict) -> bool:
    return (
        run["status"] == "queued"
        and run["narrowed_from"] == parent["id"]
        and run["approval"]["by"] == f"followup:{parent['id']}"
        and run["approval"]["kind"] == "followup"
        and run["followup_note"] is None
    )


def _waits(run: dict, because: str) -> bool:
    return (
        run["status"] == "awaiting_approval"
        and run["approval"] is None
        and run["narrowed_from"] is None
        and because in (run["followup_note"] or "")
    )


# followups.refusal decides on the loaded parent row and the company's settings, in Python: not an engine's.
# The claim's conditional update (count and expiry in SQL), the race for the last slot and another person's
# or company's run stay on both engines below.
@pytest.mark.sqlite
async def test_a_persons_approval_grants_follow_ups_shown_in_the_detail(client, alice, demo_db) -> None:
    await _on(followup_grant_hours=6, followup_grant_max_runs=3)
    feedback = await _feedback_file()
    waiting = await _propose(client, alice, datasets=["deals", "tasks"], files=[feedback])
    # before approving, the detail says what approving would grant
    offer = waiting["followup_grant_on_approval"]
    assert offer["max_runs"] == 3 and offer["hours"] == 6
    assert offer["datasets"] == ["deals", "tasks"] and offer["file_ids"] == [feedback]
    assert offer["files"] == [{"id": feedback, "name": "Customer feedback.xlsx"}]
    before = datetime.now(UTC)
    parent = await _approve(client, "alice@acme.example", waiting)
    grant = parent["followup_grant"]
    expires = datetime.fromisoformat(str(grant["expires_at"]))
    assert (
        before + timedelta(hours=6) - timedelta(minutes=1) < expires < before + timedelta(hours=6, minutes=1)
    )
    assert grant["max_runs"] == 3 and grant["used"] == 0 and grant["active"] is True
    assert grant["datasets"] == ["deals", "tasks"] and grant["file_ids"] == [feedback]
    entry = (
        await AuditEntry.select()
        .where((AuditEntry.action == "run.approved") & (AuditEntry.subject_id == str(parent["id"])))
        .first()
    )
    assert "followup_grant" in str(entry["data"])
    # within the grant and a narrower scope: queued without another approval, and visibly so
    run = await _followup(client, alice, parent, datasets=["deals"], files=[feedback])
    assert _queued_from(run, parent)
    audit = (
        await AuditEntry.select()
        .where(
            (AuditEntry.action == "run.followup_auto_approved") & (AuditEntry.subject_id == str(run["id"]))
        )
        .first()
    )
    assert audit is not None and str(parent["id"]) in str(audit["data"])
    assert (await client.get(f"/api/runs/{parent['id']}", headers=alice)).json()["followup_grant"][
        "used"
    ] == 1
    # an auto-approved follow-up grants nothing itself
    assert run["followup_grant"] is None


@pytest.mark.sqlite  # followups.refusal's, in Python (see the first test's mark)
async def test_a_follow_up_without_followup_of_needs_approval(client, alice, demo_db) -> None:
    """The old door: the same free-text conversation id alone no longer skips approval."""
    await _on()
    parent = await _parent(client, alice)
    plain = await _propose(client, alice, datasets=["deals"], conversation_id=parent["conversation_id"])
    assert plain["status"] == "awaiting_approval" and plain["narrowed_from"] is None
    assert _queued_from(await _followup(client, alice, parent), parent)  # positive control


async def test_an_expired_grant_falls_back_to_approval(client, alice, demo_db) -> None:
    await _on()
    parent = await _parent(client, alice)
    assert _queued_from(await _followup(client, alice, parent), parent)  # positive control
    moment = datetime.now(UTC) - timedelta(minutes=1)  # move the clock past the grant
    await Run.update({Run.followup_grant_expires_at: moment}).where(Run.id == parent["id"])
    run = await _followup(client, alice, parent)
    assert _waits(run, "expired at")
    assert await followups.claim(parent["id"]) is False  # the claim re-checks the expiry in the database
    detail = (await client.get(f"/api/runs/{parent['id']}", headers=alice)).json()
    assert detail["followup_grant"]["active"] is False


@pytest.mark.sqlite  # followups.refusal's, in Python (see the first test's mark)
async def test_widening_the_scope_falls_back_to_approval(client, alice, demo_db) -> None:
    await _on()
    feedback = await _feedback_file()
    parent = await _parent(client, alice, datasets=["deals", "tasks"], limits={"wall_seconds": 60})
    assert _waits(await _followup(client, alice, parent, datasets=["deals", "contacts"]), "contacts")
    assert _waits(await _followup(client, alice, parent, files=[feedback]), "files")
    assert _waits(await _followup(client, alice, parent, limits={"wall_seconds": 120}), "higher limits")
    # positive control: the same or a narrower scope, within the limits
    same = {"datasets": ["tasks", "deals"], "limits": {"wall_seconds": 60}}
    assert _queued_from(await _followup(client, alice, parent, **same), parent)
    assert _queued_from(await _followup(client, alice, parent, limits={"wall_seconds": 30}), parent)


@pytest.mark.sqlite  # followups.refusal's, in Python (see the first test's mark)
async def test_another_conversations_run_cannot_be_named(client, alice, demo_db) -> None:
    await _on()
    parent = await _parent(client, alice, conversation_id="conv-1")
    run = await _followup(client, alice, parent, conversation_id="conv-2")
    assert _waits(run, "another conversation")
    # nor can a run of conversation 2 lend conversation 1's grant by naming it
    other = await _parent(client, alice, conversation_id="conv-2", datasets=["contacts"])
    assert _waits(await _followup(client, alice, other, conversation_id="conv-1"), "another conversation")
    # positive controls: each grant works in its own conversation
    assert _queued_from(await _followup(client, alice, parent), parent)
    assert _queued_from(await _followup(client, alice, other, datasets=["contacts"]), other)


async def test_another_users_or_companys_run_cannot_be_named(client, alice, demo_db) -> None:
    await _on()
    await enable_code("Globex", followup_without_reapproval=True)
    bob = await token_for(client, "bob@acme.example")
    bobs = await _parent(client, bob, email="bob@acme.example", conversation_id="bob-conv")
    run = await _followup(client, alice, bobs)  # alice's assistant names bob's run and his conversation id
    assert _waits(run, "not one of your runs")
    assert (await Run.select(Run.followup_grant_used).where(Run.id == bobs["id"]).first())[
        "followup_grant_used"
    ] == 0
    gus = await token_for(client, "admin@globex.example")
    globex = await _parent(client, gus, email="admin@globex.example", datasets=["deals"])
    assert _waits(await _followup(client, alice, globex), "not one of your runs")
    # an admin approving alice's run makes a grant for alice's run, not for the admin's assistant
    admin = await token_for(client, "admin@acme.example")
    approved_by_admin = await _approve(
        client, "admin@acme.example", await _propose(client, alice, datasets=["deals"], conversation_id="c3")
    )
    assert _waits(await _followup(client, admin, approved_by_admin), "not one of your runs")
    # positive controls: bob's own follow-up, and alice's on the run the admin approved for her
    assert _queued_from(await _followup(client, bob, bobs), bobs)
    assert _queued_from(await _followup(client, alice, approved_by_admin), approved_by_admin)


@pytest.mark.sqlite  # followups.refusal's, in Python (see the first test's mark)
async def test_only_a_persons_approval_grants(client, alice, demo_db) -> None:
    await _on()
    parent = await _parent(client, alice)
    child = await _followup(client, alice, parent)
    assert _queued_from(child, parent)
    # a chain: the auto-approved follow-up cannot itself lend a grant
    assert _waits(await _followup(client, alice, child), "not approved by a person")
    # a run still waiting for approval grants nothing either
    waiting = await _propose(client, alice, datasets=["deals", "tasks"])
    assert _waits(await _followup(client, alice, waiting), "not approved by a person")


async def test_the_grant_is_capped_in_count(client, alice, demo_db) -> None:
    await _on(followup_grant_max_runs=2)
    parent = await _parent(client, alice)
    assert _queued_from(await _followup(client, alice, parent), parent)  # positive control, twice
    assert _queued_from(await _followup(client, alice, parent, code="print(2)"), parent)
    assert _waits(await _followup(client, alice, parent, code="print(3)"), "used 2 time(s)")
    grant = (await client.get(f"/api/runs/{parent['id']}", headers=alice)).json()["followup_grant"]
    assert grant["used"] == 2 and grant["active"] is False


async def test_parallel_follow_ups_cannot_both_take_the_last_slot(
    client, alice, demo_db, monkeypatch
) -> None:
    await _on(followup_grant_max_runs=1)
    parent = await _parent(client, alice)
    meet_after(monkeypatch, followups, "refusal", 4)  # all four see one slot left before any takes it
    async with concurrent_client(client) as assistant:
        responses = await asyncio.gather(
            *(
                assistant.post(
                    "/api/runs",
                    json=proposal(code=f"print({i})", followup_of=parent["id"]),
                    headers=alice,
                )
                for i in range(4)
            )
        )
    assert [r.status_code for r in responses] == [201] * 4, [r.text for r in responses]
    results = [r.json() for r in responses]
    assert sorted(r["status"] for r in results) == ["awaiting_approval"] * 3 + ["queued"]
    assert sum("no runs left" in (r["followup_note"] or "") for r in results) == 3
    assert await Run.count().where(Run.narrowed_from == parent["id"]) == 1
    # the claim itself, raced directly: one slot, one winner
    second = await _parent(client, alice, conversation_id="conv-race")
    claims = await asyncio.gather(*(followups.claim(second["id"]) for _ in range(8)))
    assert claims.count(True) == 1


@pytest.mark.sqlite  # followups.refusal's, in Python (see the first test's mark)
async def test_turning_the_setting_off_revokes_existing_grants(client, alice, demo_db) -> None:
    await _on()
    parent = await _parent(client, alice)
    assert _queued_from(await _followup(client, alice, parent), parent)  # positive control
    await Company.update({Company.followup_without_reapproval: False}).where(Company.name == "Acme Analytics")
    assert _waits(await _followup(client, alice, parent), "turned off")
    assert (await client.get(f"/api/runs/{parent['id']}", headers=alice)).json()["followup_grant"][
        "active"
    ] is False
    # an approval given while the setting was off grants nothing when it is turned on later
    no_grant = await _parent(client, alice, conversation_id="conv-off")
    assert no_grant["followup_grant"] is None
    await _on()
    assert _waits(await _followup(client, alice, no_grant), "granted no follow-ups")


@pytest.mark.sqlite  # followups.refusal's, in Python (see the first test's mark)
async def test_the_approval_screen_offer_follows_the_setting(client, alice, demo_db) -> None:
    await enable_code()
    waiting = await _propose(client, alice)
    assert waiting["followup_grant_on_approval"] is None
    await _on()
    shown = (await client.get(f"/api/runs/{waiting['id']}", headers=alice)).json()
    assert shown["followup_grant_on_approval"]["datasets"] == ["deals"]


@pytest.mark.sqlite  # who may change the settings and their validation, not an engine's
async def test_admin_configures_the_grant_and_the_assistant_cannot(client, demo_db) -> None:
    await _on()
    admin_token = await token_for(client, "admin@acme.example")
    r = await client.patch(
        "/api/company/settings",
        json={"followup_grant_hours": 168, "followup_grant_max_runs": 100},
        headers=admin_token,
    )
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    await login(client, "admin@acme.example")
    for bad in (
        {"followup_grant_hours": 0},
        {"followup_grant_hours": 169},
        {"followup_grant_max_runs": 0},
        {"followup_grant_max_runs": 101},
        {"followup_grant_hours": "forever"},
    ):
        r = await client.patch("/api/company/settings", json=bad)
        assert r.status_code in (400, 422) and r.json()["error"] == "invalid", (bad, r.text)
    # positive control: the admin, signed in, sets both; the next approval uses them
    r = await client.patch(
        "/api/company/settings", json={"followup_grant_hours": 2, "followup_grant_max_runs": 5}
    )
    assert r.status_code == 200, r.text
    assert r.json()["followup_grant_hours"] == 2 and r.json()["followup_grant_max_runs"] == 5
    changed = (
        await AuditEntry.select()
        .where(AuditEntry.action == "settings.changed")
        .order_by(AuditEntry.id, ascending=False)
        .first()
    )
    assert "followup_grant_hours" in str(changed["data"])
    client.cookies.clear()
    alice = await token_for(client, "alice@acme.example")
    grant = (await _parent(client, alice))["followup_grant"]
    expires = datetime.fromisoformat(str(grant["expires_at"]))
    assert expires < datetime.now(UTC) + timedelta(hours=2, minutes=1) and grant["max_runs"] == 5


# the mark is set in Python from the run's grant (the claim's SQL on both engines: the tests above)
@pytest.mark.sqlite
async def test_action_items_of_an_unreviewed_follow_up_are_marked(client, alice, demo_db) -> None:
    await _on()
    parent = await _parent(client, alice, datasets=["deals"])
    child = await _followup(client, alice, parent)
    assert _queued_from(child, parent)
    alice_id = (await User.select(User.id).where(User.email == "alice@acme.example").first())["id"]
    deal = await Deal.select().where(Deal.owner == alice_id).first()
    entry = {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 33}}
    ctx = await load_user_context_by_email("alice@acme.example")
    for run_id in (parent["id"], child["id"]):  # what the worker does with each run's actions.json
        row = await Run.select().where(Run.id == run_id).output(load_json=True).first()
        await actions.ingest(row, [entry], ctx)
    unreviewed = (await client.get(f"/api/runs/{child['id']}/action-items", headers=alice)).json()
    reviewed = (await client.get(f"/api/runs/{parent['id']}/action-items", headers=alice)).json()
    assert [i["unreviewed_run"] for i in unreviewed] == [True]
    assert [i["unreviewed_run"] for i in reviewed] == [False]  # positive control
    one = await client.get(f"/api/action-items/{unreviewed[0]['id']}", headers=alice)
    assert one.json()["unreviewed_run"] is True
