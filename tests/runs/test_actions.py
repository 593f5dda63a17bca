"""Proposed actions: validated into items, decided one at a time, re-checked at acceptance."""

from __future__ import annotations

import pytest

from backend.actions import service as actions
from backend.actions.tables import ActionItem
from backend.records.tables import Deal
from backend.runs.tables import Run
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import User
from tests.support.http import decide_item_as
from tests.support.runs import as_user, proposal


async def _run_with(client, alice, entries) -> tuple[int, list[dict]]:
    # a change may only touch a dataset the run staged (see test_action_scope.py)
    run = (await client.post("/api/runs", json=proposal(datasets=["deals", "tasks"]), headers=alice)).json()
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    ctx = await load_user_context_by_email("alice@acme.example")
    await actions.ingest(row, entries, ctx)
    items = (await client.get(f"/api/runs/{run['id']}/action-items", headers=alice)).json()
    return run["id"], items


async def _alice_deal(visibility: str = "team") -> dict:
    alice = (await User.select(User.id).where(User.email == "alice@acme.example").first())["id"]
    return await Deal.select().where((Deal.owner == alice) & (Deal.visibility == visibility)).first()


async def _bobs_private_deal() -> dict:
    bob = (await User.select(User.id).where(User.email == "bob@acme.example").first())["id"]
    return await Deal.select().where((Deal.owner == bob) & (Deal.visibility == "private")).first()


# the entries' validation, in Python (an accepted change written on both engines: the test below)
@pytest.mark.sqlite
async def test_valid_invalid_and_forbidden_entries(client, alice, acme_on) -> None:
    deal = await _alice_deal()
    entries = [
        {
            "op": "update",
            "dataset": "deals",
            "record_id": deal["id"],
            "changes": {"probability": 90},
            "reason": "verbal yes",
        },
        {
            "op": "create",
            "dataset": "tasks",
            "changes": {"title": "Call back", "status": "open", "priority": "high"},
        },
        "not an object",
        {"op": "delete", "dataset": "deals", "record_id": deal["id"], "changes": {"stage": "lost"}},
        {"op": "update", "dataset": "widgets", "record_id": 1, "changes": {"x": 1}},
        {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"owner": 1}},
        {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"stage": "maybe"}},
        {"op": "update", "dataset": "employees", "record_id": 1, "changes": {"salary": 1}},
        {
            "op": "update",
            "dataset": "deals",
            "record_id": (await _bobs_private_deal())["id"],
            "changes": {"probability": 1},
        },
    ]
    _, items = await _run_with(client, alice, entries)
    statuses = [i["status"] for i in items]
    assert statuses == ["pending", "pending"] + ["invalid"] * 7
    problems = [i["problem"] for i in items[2:]]
    assert "object" in problems[0] and "op must be" in problems[1] and "unknown dataset" in problems[2]
    assert "not writable" in problems[3] and "must be one of" in problems[4]
    assert "no edit permission on employees" in problems[5] and "not visible" in problems[6]
    assert items[0]["before"] == {"probability": deal["probability"]}


async def test_accept_writes_one_item_and_bumps_the_version(client, alice, acme_on) -> None:
    deal = await _alice_deal()
    _, items = await _run_with(
        client,
        alice,
        [
            {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 95}},
            {
                "op": "update",
                "dataset": "deals",
                "record_id": deal["id"],
                "changes": {"notes": "from the run"},
            },
        ],
    )
    untouched = await Deal.select().where(Deal.id == deal["id"]).first()
    assert untouched["probability"] == deal["probability"]  # nothing written before a decision
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"], "accept")
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    after = await Deal.select().where(Deal.id == deal["id"]).first()
    assert after["probability"] == 95 and after["version"] == deal["version"] + 1
    # the second item was staged against the old version: a conflict, nothing written
    r = await decide_item_as(client, "alice@acme.example", items[1]["id"], "accept")
    assert r.status_code == 409 and r.json()["error"] == "conflict"
    assert (await Deal.select().where(Deal.id == deal["id"]).first())["notes"] == deal["notes"]
    assert (await ActionItem.select().where(ActionItem.id == items[1]["id"]).first())["status"] == "conflict"


# a rejection's bookkeeping, the app's (the write on both engines: the test above; races on PostgreSQL:
# test_action_scope)
@pytest.mark.sqlite
async def test_reject_one_item_leaves_the_others(client, alice, acme_on) -> None:
    deal = await _alice_deal()
    _, items = await _run_with(
        client,
        alice,
        [
            {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 5}},
            {
                "op": "create",
                "dataset": "tasks",
                "changes": {"title": "Send recap", "status": "open", "priority": "normal"},
            },
        ],
    )
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"], "reject", json={"reason": "no"})
    assert r.json()["status"] == "rejected"
    assert (await Deal.select().where(Deal.id == deal["id"]).first())["probability"] == deal["probability"]
    r = await decide_item_as(client, "alice@acme.example", items[1]["id"], "accept")
    assert r.status_code == 200 and r.json()["created_record_id"]
    assert (await decide_item_as(client, "alice@acme.example", items[1]["id"], "accept")).status_code == 409


@pytest.mark.sqlite  # the permission check at accept, in Python, not an engine's
async def test_accepting_rechecks_permission(client, alice, acme_on) -> None:
    from backend.tenancy.tables import PermissionSet

    deal = await _alice_deal()
    _, items = await _run_with(
        client,
        alice,
        [
            {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 42}},
        ],
    )
    sales = await PermissionSet.select().where(PermissionSet.name == "Sales").output(load_json=True).first()
    await PermissionSet.update({PermissionSet.grants: {**sales["grants"], "deals": "read"}}).where(
        PermissionSet.id == sales["id"]
    )
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"], "accept")
    assert r.status_code == 403 and "edit permission" in r.text
    assert (await Deal.select().where(Deal.id == deal["id"]).first())["probability"] == deal["probability"]


@pytest.mark.sqlite  # the cap is checked before ingest, in Python
async def test_over_the_cap_no_change_becomes_an_item(client, alice, acme_on, monkeypatch) -> None:
    """One cap, the sandbox's: an actions.json over it is rejected whole, and ingest never keeps a part."""
    import json

    import pytest

    from backend.sandbox.output import parse_actions
    from backend.settings import get_settings

    monkeypatch.setattr(get_settings(), "max_actions_per_run", 3)
    deal = await _alice_deal()
    run = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    ctx = await load_user_context_by_email("alice@acme.example")
    entries = [
        {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": i}}
        for i in range(4)
    ]
    parsed, problem = parse_actions(json.dumps(entries).encode())
    assert parsed is None and "at most 3" in problem
    with pytest.raises(ValueError, match="over the cap"):
        await actions.ingest(row, entries, ctx)
    assert await ActionItem.count().where(ActionItem.run == run["id"]) == 0
    parsed, problem = parse_actions(json.dumps(entries[:3]).encode())  # positive control: at the cap
    assert problem is None and await actions.ingest(row, parsed, ctx) == 3
    assert await ActionItem.count().where(ActionItem.run == run["id"]) == 3


@pytest.mark.sqlite  # who may decide, the app's, not an engine's
async def test_other_users_and_companies_cannot_decide(client, alice, acme_on) -> None:
    deal = await _alice_deal()
    _, items = await _run_with(
        client,
        alice,
        [
            {"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 42}},
        ],
    )
    await as_user(client, "bob@acme.example")
    assert (await client.post(f"/api/action-items/{items[0]['id']}/accept")).status_code == 404
    await as_user(client, "admin@globex.example")
    assert (await client.post(f"/api/action-items/{items[0]['id']}/accept")).status_code == 404
    await as_user(client, "admin@acme.example")  # positive control: the company admin may decide
    assert (await client.post(f"/api/action-items/{items[0]['id']}/accept")).status_code == 200


@pytest.mark.sqlite  # who may read an item, the app's, not an engine's
async def test_an_item_is_not_readable_by_a_colleague(client, alice, acme_on) -> None:
    deal = await _alice_deal()
    _, items = await _run_with(
        client,
        alice,
        [{"op": "update", "dataset": "deals", "record_id": deal["id"], "changes": {"probability": 1}}],
    )
    assert (await client.get(f"/api/action-items/{items[0]['id']}", headers=alice)).status_code == 200
    await as_user(client, "bob@acme.example")
    assert (await client.get(f"/api/action-items/{items[0]['id']}")).status_code == 404
