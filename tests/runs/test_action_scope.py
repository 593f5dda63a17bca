"""Actions stay inside the run's scope: a proposed change may touch only a dataset the run staged, its
reference fields must point to a record of the same company, and two concurrent accepts of one item make
one change (the second answers 409). The hostile party is the assistant's code: it writes actions.json."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from backend.actions import service as actions
from backend.actions.tables import ActionItem
from backend.records.datasets import DATASETS, REFERENCES
from backend.records.tables import Account, Contact, Deal, Task
from backend.tenancy.tables import Company, User
from tests.support.concurrency import concurrent_client, meet_after
from tests.support.http import login
from tests.support.runs import enable_code, proposal


def _code_writing(entries: list[dict[str, Any]]) -> str:
    """What the assistant's code does to propose changes: write actions.json in its output folder."""
    return (
        "import json\n"
        f"ACTIONS = {json.dumps(entries)}\n"
        'json.dump(ACTIONS, open("/work/output/actions.json", "w"))\n'
    )


def _stand_in_sandbox(code: str, *, read_actions: bool = True, **_: Any):
    """Stands in for the VM (no VM tests here): returns the actions.json the code above writes, read by
    the sandbox's own rule (a malformed or over-the-cap file is rejected whole)."""
    from backend.sandbox.models import RejectedFile, SandboxResult, Timings, VmInfo
    from backend.sandbox.output import parse_actions

    line = next(line for line in code.splitlines() if line.startswith("ACTIONS = "))
    parsed, problem = (
        parse_actions(line.removeprefix("ACTIONS = ").encode()) if read_actions else (None, None)
    )
    return SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout="",
        actions=parsed,
        rejected_files=[RejectedFile(name="actions.json", reason=problem)] if problem else [],
        actions_discarded=not read_actions,
        timings_ms=Timings(start=1, execute=1, collect=1, total=3),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
    )


async def _items_from_run(client, token, monkeypatch, datasets: list[str], entries: list[dict]) -> list[dict]:
    """The assistant proposes (token), alice approves (session), the run executes, the token reads items."""
    from backend import execution, sandbox

    run = (
        await client.post(
            "/api/runs", json=proposal(_code_writing(entries), datasets=datasets), headers=token
        )
    ).json()
    await login(client, "alice@acme.example")
    r = await client.post(
        f"/api/runs/{run['id']}/approve",
        json={"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
    )
    assert r.status_code == 200, r.text
    client.cookies.clear()
    monkeypatch.setattr(sandbox, "run_code", _stand_in_sandbox)
    assert await execution.execute(run["id"]) == "succeeded"
    r = await client.get(f"/api/runs/{run['id']}/action-items", headers=token)
    assert r.status_code == 200, r.text
    return r.json()


async def _id_of(email: str) -> int:
    return (await User.select(User.id).where(User.email == email).first())["id"]


async def _alices(table) -> dict:
    return await table.select().where(table.owner == await _id_of("alice@acme.example")).first()


async def _globex(table) -> dict:
    globex = (await Company.select(Company.id).where(Company.name == "Globex").first())["id"]
    return await table.select().where(table.company == globex).first()


def _task(title: str, **more: Any) -> dict:
    return {"op": "create", "dataset": "tasks", "changes": {"title": title, "status": "open", **more}}


def _deal(deal_id: int, **changes: Any) -> dict:
    return {"op": "update", "dataset": "deals", "record_id": deal_id, "changes": changes}


@pytest.fixture
async def on(demo_db: str) -> None:
    await enable_code()


def test_every_id_field_of_a_dataset_is_a_known_reference() -> None:
    """A new BigInt id column must be declared in REFERENCES, or a change could point anywhere."""
    for dataset in DATASETS.values():
        for name, kind in dataset.column_types.items():
            if name in dataset.fields and kind == "BigInt":
                assert name in REFERENCES, f"{dataset.name}.{name} is not in REFERENCES"
    assert all(target in DATASETS for target in REFERENCES.values())


# the entry's dataset against the run's staged list, in Python: not an engine's (references, checked by
# queries, and the racing accepts stay on both engines below)
@pytest.mark.sqlite
async def test_a_change_to_a_dataset_the_run_did_not_stage_is_rejected(
    client, alice, on, monkeypatch
) -> None:
    deal, contact = await _alices(Deal), await _alices(Contact)
    entries = [
        _deal(deal["id"], probability=77),
        _task("Call back"),
        {"op": "update", "dataset": "contacts", "record_id": contact["id"], "changes": {"title": "CEO"}},
    ]
    items = await _items_from_run(client, alice, monkeypatch, ["deals"], entries)
    assert [i["status"] for i in items] == ["pending", "invalid", "invalid"]
    assert "staged only deals" in items[1]["problem"] and "outside the scope" in items[1]["problem"]
    assert "a change to contacts is outside the scope" in items[2]["problem"]
    # positive control: the same entries from a run that staged all three datasets
    items = await _items_from_run(client, alice, monkeypatch, ["deals", "tasks", "contacts"], entries)
    assert [i["status"] for i in items] == ["pending"] * 3


# the reference's company checked by the app (accepts racing on PostgreSQL: the tests below)
@pytest.mark.sqlite
async def test_references_must_point_inside_the_company(client, alice, on, monkeypatch) -> None:
    deal, account = await _alices(Deal), await _alices(Account)
    theirs_deal, theirs_account = await _globex(Deal), await _globex(Account)
    entries = [
        _task("Poke Globex", related_deal_id=theirs_deal["id"]),
        _deal(deal["id"], account_id=theirs_account["id"]),
        _deal(deal["id"], account_id=10**12),
        _deal(deal["id"], account_id=-1),
        _task("Follow up on our deal", related_deal_id=deal["id"]),  # positive controls
        _deal(deal["id"], account_id=account["id"]),
        _deal(deal["id"], account_id=None),
    ]
    items = await _items_from_run(client, alice, monkeypatch, ["deals", "tasks"], entries)
    assert [i["status"] for i in items] == ["invalid"] * 4 + ["pending"] * 3
    assert (
        f"related_deal_id {theirs_deal['id']} does not point to a record in deals of this company"
        in (items[0]["problem"])
    )
    assert f"account_id {theirs_account['id']} does not point to a record in accounts" in items[1]["problem"]
    await login(client, "alice@acme.example")
    r = await client.post(f"/api/action-items/{items[4]['id']}/accept")
    assert r.status_code == 200, r.text
    created = await Task.select().where(Task.id == r.json()["created_record_id"]).first()
    assert created["related_deal_id"] == deal["id"]


# the reference's company checked again by the app (accepts racing on PostgreSQL: the tests below)
@pytest.mark.sqlite
async def test_a_reference_is_checked_again_at_accept(client, alice, on, monkeypatch) -> None:
    deal = await _alices(Deal)
    gone = (await _alices(Account))["id"]
    entries = [_deal(deal["id"], account_id=gone), _task("Check the account", related_deal_id=deal["id"])]
    items = await _items_from_run(client, alice, monkeypatch, ["deals", "tasks"], entries)
    assert [i["status"] for i in items] == ["pending", "pending"]
    await Account.delete().where(Account.id == gone)  # the account is gone by the time a person decides
    await login(client, "alice@acme.example")
    r = await client.post(f"/api/action-items/{items[0]['id']}/accept")
    assert r.status_code == 403 and f"account_id {gone} does not point to a record" in r.text
    assert (await Deal.select(Deal.account_id).where(Deal.id == deal["id"]).first())["account_id"] != gone
    # positive control: an item whose reference still holds is applied
    assert (await client.post(f"/api/action-items/{items[1]['id']}/accept")).status_code == 200


async def test_two_concurrent_accepts_make_one_change(client, alice, on, monkeypatch) -> None:
    deal = await _alices(Deal)
    entries = [_task("Race to create this task"), _deal(deal["id"], probability=61)]
    items = await _items_from_run(client, alice, monkeypatch, ["deals", "tasks"], entries)
    create, update = items
    # the assistant's token cannot accept at all; the person can, once
    r = await client.post(f"/api/action-items/{create['id']}/accept", headers=alice)
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    await login(client, "alice@acme.example")
    meet_after(monkeypatch, actions, "_item_for", 2)  # both see the item pending before either decides

    async with concurrent_client(client) as person:
        for item in (create, update):
            url = f"/api/action-items/{item['id']}/accept"
            first, second = await asyncio.gather(person.post(url), person.post(url))
            assert sorted([first.status_code, second.status_code]) == [200, 409], (first.text, second.text)
            loser = first if first.status_code == 409 else second
            assert loser.json()["error"] == "conflict"
    tasks = await Task.select(Task.id).where(Task.title == "Race to create this task")
    assert len(tasks) == 1  # exactly one record created
    row = await ActionItem.select().where(ActionItem.id == create["id"]).first()
    assert row["status"] == "accepted" and row["created_record_id"] == tasks[0]["id"]
    after = await Deal.select().where(Deal.id == deal["id"]).first()
    assert after["version"] == deal["version"] + 1 and after["probability"] == 61  # exactly one change


async def test_accept_and_reject_racing_decide_once(client, alice, on, monkeypatch) -> None:
    items = await _items_from_run(client, alice, monkeypatch, ["tasks"], [_task("Accept or reject me")])
    await login(client, "alice@acme.example")
    meet_after(monkeypatch, actions, "_item_for", 2)
    url = f"/api/action-items/{items[0]['id']}"
    async with concurrent_client(client) as person:
        accepted, rejected = await asyncio.gather(person.post(f"{url}/accept"), person.post(f"{url}/reject"))
    assert sorted([accepted.status_code, rejected.status_code]) == [200, 409]
    status = (await ActionItem.select().where(ActionItem.id == items[0]["id"]).first())["status"]
    made = await Task.count().where(Task.title == "Accept or reject me")
    assert (status, made) in (("accepted", 1), ("rejected", 0))


@pytest.mark.sqlite  # the file's count, checked before any item is saved: not an engine's
async def test_an_actions_file_over_the_cap_becomes_no_items_and_the_run_says_why(
    client, alice, on, monkeypatch
) -> None:
    from backend.settings import get_settings

    monkeypatch.setattr(get_settings(), "max_actions_per_run", 2)
    token = alice
    over = [_task(f"call {i}") for i in range(3)]
    assert await _items_from_run(client, token, monkeypatch, ["tasks"], over) == []
    run = (await client.get("/api/runs", headers=token)).json()["items"][0]
    detail = (await client.get(f"/api/runs/{run['id']}", headers=token)).json()
    assert detail["action_items_count"] == 0
    assert "proposes 3 actions; at most 2 are allowed" in detail["actions_note"]
    assert detail["result"]["rejected_files"] == [{"name": "actions.json", "reason": detail["actions_note"]}]
    at_cap = await _items_from_run(client, token, monkeypatch, ["tasks"], over[:2])  # positive control
    assert [i["status"] for i in at_cap] == ["pending", "pending"]
