"""Outputs keep the permissions of their inputs: a file a run computes from `employees` is shown only to people
who may read `employees` (and admins), through the one visibility rule (records/visibility.py).

The attack: alice is given the HR permission; she is in team East, which maria manages, and maria has no
HR permission. As a manager maria sees alice's private Drive files, so without the tags she would see
(and could download and stage) a salary table alice's run computed. The positive controls: the same kind
of output from a run over `deals` stays visible to maria; alice and the admin see the `employees` one.

The sandbox call is replaced by a stand-in that writes the output files (the real-VM path is covered by
tests/runs/test_runs_vm.py); everything after it, filing the outputs in Drive, is the worker's own code.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from backend import execution, sandbox
from backend.drive import service as drive
from backend.drive.tables import DriveFile, DriveFolder
from backend.errors import NotFound
from backend.records.visibility import owned_rows_where
from backend.runs.tables import Run
from backend.sandbox.models import OutputFile, SandboxResult, Timings, VmInfo
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import PermissionSet, User, UserPermissionSet
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

PAY = b"full_name,salary\nAlex Example,91000\n"


def _stand_in_vm(code: str, *, out_dir: Path, **_: Any) -> SandboxResult:
    """What a VM returns for code that writes one output file named in the code's first comment."""
    name = code.splitlines()[0].lstrip("# ").strip()
    (out_dir / name).write_bytes(PAY)
    return SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout="wrote " + name + "\n",
        files=[OutputFile(name=name, size=len(PAY), sha256=hashlib.sha256(PAY).hexdigest())],
        timings_ms=Timings(total=800),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"]),
    )


@pytest.fixture
async def alice_has_hr(demo_db: str) -> None:
    """alice (team East, managed by maria) also holds the HR permission set; maria still does not."""
    await enable_code()
    alice = await User.select(User.id).where(User.email == "alice@acme.example").first()
    acme_hr = (
        await PermissionSet.select(PermissionSet.id)
        .where((PermissionSet.name == "HR") & (PermissionSet.company == (await _acme())))
        .first()
    )
    await UserPermissionSet(user=alice["id"], permission_set=acme_hr["id"]).save()
    maria = await load_user_context_by_email("maria@acme.example")
    alice_ctx = await load_user_context_by_email("alice@acme.example")
    assert alice_ctx.user_id in maria.managed_user_ids and not maria.can("employees")
    assert alice_ctx.can("employees")


async def _acme() -> int:
    return (await User.select(User.company).where(User.email == "admin@acme.example").first())["company"]


async def _run_to_output(
    client, monkeypatch, token: dict[str, str], name: str, **body: Any
) -> dict[str, Any]:
    """alice's assistant proposes, alice approves as a person, the worker runs it and files its output."""
    r = await client.post("/api/runs", json=proposal(code=f"# {name}\nprint(1)", **body), headers=token)
    assert r.status_code == 201, r.text
    run = r.json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    client.cookies.clear()
    monkeypatch.setattr(sandbox, "run_code", _stand_in_vm)
    assert await execution.execute(run["id"]) == "succeeded"
    row = await DriveFile.select().where((DriveFile.run_id == run["id"]) & (DriveFile.name == name)).first()
    assert row is not None
    return {"run_id": run["id"], "file_id": row["id"], "folder_id": row["folder"]}


async def _drive_view(client, email: str, out: dict[str, Any]) -> dict[str, Any]:
    """Everything one signed-in person's Drive shows of an output: list, by run, metadata, content, folder."""
    client.cookies.clear()
    await login(client, email)
    listed = {f["id"] for f in (await client.get("/api/drive/files", params={"all": "true"})).json()}
    by_run = {
        f["id"] for f in (await client.get("/api/drive/files", params={"run_id": out["run_id"]})).json()
    }
    in_folder = (await client.get("/api/drive/files", params={"folder_id": out["folder_id"]})).json()
    folders = {f["id"] for f in (await client.get("/api/drive/folders")).json()}
    meta = await client.get(f"/api/drive/files/{out['file_id']}")
    content = await client.get(f"/api/drive/files/{out['file_id']}/content")
    ctx = await load_user_context_by_email(email)
    row = await DriveFile.select(DriveFile.name).where(DriveFile.id == out["file_id"]).first()
    try:
        found = (await drive.find_file_by_name(ctx, row["name"]))["id"] == out["file_id"]
    except NotFound:
        found = False
    client.cookies.clear()
    return {
        "listed": out["file_id"] in listed,
        "by_run": out["file_id"] in by_run,
        "in_folder": any(f["id"] == out["file_id"] for f in in_folder),
        "folder": out["folder_id"] in folders,
        "meta": meta.status_code,
        "content": content.content if content.status_code == 200 else content.status_code,
        "found_by_name": found,
    }


SEES_ALL = {
    "listed": True,
    "by_run": True,
    "in_folder": True,
    "folder": True,
    "meta": 200,
    "content": PAY,
    "found_by_name": True,
}
SEES_NOTHING = {
    "listed": False,
    "by_run": False,
    "in_folder": False,
    "folder": False,
    "meta": 404,
    "content": 404,
    "found_by_name": False,
}


async def test_an_output_from_employees_is_hidden_from_a_manager_without_hr(
    client, monkeypatch, alice_has_hr
) -> None:
    alice = await token_for(client, "alice@acme.example")
    pay = await _run_to_output(client, monkeypatch, alice, "pay.csv", datasets=["employees"])
    pipeline = await _run_to_output(client, monkeypatch, alice, "pipeline.csv", datasets=["deals"])

    tags = await DriveFile.select(DriveFile.source_datasets).where(DriveFile.id == pay["file_id"]).first()
    assert drive.source_tags(tags["source_datasets"]) == ["employees"]
    folder = await DriveFolder.select(DriveFolder.source_datasets).where(DriveFolder.id == pay["folder_id"])
    assert drive.source_tags(folder[0]["source_datasets"]) == ["employees"]

    # the attack: maria manages alice, holds no HR permission
    assert await _drive_view(client, "maria@acme.example", pay) == SEES_NOTHING
    # positive control: the same kind of output from deals, which maria may read, she sees as alice's manager
    assert await _drive_view(client, "maria@acme.example", pipeline) == SEES_ALL
    # the HR user who ran it, and the admin, see it
    assert await _drive_view(client, "alice@acme.example", pay) == SEES_ALL
    assert await _drive_view(client, "admin@acme.example", pay) == SEES_ALL

    # the run's detail lists it for alice (and the admin); maria cannot open alice's run at all
    await login(client, "alice@acme.example")
    detail = (await client.get(f"/api/runs/{pay['run_id']}")).json()
    assert [f["id"] for f in detail["output_files"]] == [pay["file_id"]]
    assert detail["output_files"][0]["source_datasets"] == ["employees"]
    client.cookies.clear()
    await login(client, "maria@acme.example")
    assert (await client.get(f"/api/runs/{pay['run_id']}")).status_code == 404
    client.cookies.clear()


async def test_a_manager_without_hr_cannot_stage_it_and_the_hr_user_can(
    client, monkeypatch, alice_has_hr
) -> None:
    alice = await token_for(client, "alice@acme.example")
    maria = await token_for(client, "maria@acme.example")
    pay = await _run_to_output(client, monkeypatch, alice, "pay.csv", datasets=["employees"])
    pipeline = await _run_to_output(client, monkeypatch, alice, "pipeline.csv", datasets=["deals"])

    # the attack: maria's assistant stages alice's salary table into maria's own run
    r = await client.post("/api/runs", json=proposal(files=[pay["file_id"]]), headers=maria)
    assert r.status_code == 404, r.text
    # positive control: the deals output stages for maria
    r = await client.post("/api/runs", json=proposal(files=[pipeline["file_id"]]), headers=maria)
    assert r.status_code == 201, r.text
    # the HR user stages it
    r = await client.post("/api/runs", json=proposal(datasets=[], files=[pay["file_id"]]), headers=alice)
    assert r.status_code == 201, r.text
    staged = {f["source"].get("drive_file_id") for f in r.json()["manifest"]["files"] if "source" in f}
    assert pay["file_id"] in staged, r.json()["manifest"]
    # and the same through the service staging uses, as maria
    maria_ctx = await load_user_context_by_email("maria@acme.example")
    with pytest.raises(NotFound):
        await drive.get_file(maria_ctx, pay["file_id"])


async def test_an_output_computed_from_a_tagged_output_keeps_the_tags(
    client, monkeypatch, alice_has_hr
) -> None:
    """Laundering: alice stages her salary table (no dataset named) and writes a copy; the copy is still
    computed from `employees`, so maria still cannot see it."""
    alice = await token_for(client, "alice@acme.example")
    pay = await _run_to_output(client, monkeypatch, alice, "pay.csv", datasets=["employees"])
    copy = await _run_to_output(client, monkeypatch, alice, "copy.csv", datasets=[], files=[pay["file_id"]])
    row = await Run.select(Run.datasets).where(Run.id == copy["run_id"]).output(load_json=True).first()
    assert row["datasets"] == []
    tags = await DriveFile.select(DriveFile.source_datasets).where(DriveFile.id == copy["file_id"]).first()
    assert drive.source_tags(tags["source_datasets"]) == ["employees"]
    assert await _drive_view(client, "maria@acme.example", copy) == SEES_NOTHING
    assert await _drive_view(client, "alice@acme.example", copy) == SEES_ALL


async def test_the_rule_is_one_where_clause_matching_whole_dataset_names(demo_db: str) -> None:
    """The condition is SQL on the JSON column: a tag names a dataset exactly (no prefix or LIKE wildcard
    match), untagged rows are unaffected, several tags need every permission, and admins see everything."""
    alice = await load_user_context_by_email("alice@acme.example")
    admin = await load_user_context_by_email("admin@acme.example")
    # maria without the inventory permission: an unreadable dataset whose name holds a LIKE wildcard (_)
    maria = await load_user_context_by_email("maria@acme.example")
    maria = replace(maria, permissions={k: v for k, v in maria.permissions.items() if k != "inventory_items"})
    assert not maria.can("inventory_items") and not maria.can("employees") and maria.can("deals")
    tagged = {
        "employees": ["employees"],
        "deals+employees": ["deals", "employees"],
        "deals": ["deals"],
        "none": [],
        "inventory_items": ["inventory_items"],
        # not dataset names: nothing may hide them by a partial or wildcard match
        "inventoryXitems": ["inventoryXitems"],
        "employees2": ["employees2"],
    }
    ids = {
        (await drive.upload(alice, f"f{i}.csv", PAY, source_datasets=tags))["id"]: key
        for i, (key, tags) in enumerate(tagged.items())
    }

    async def visible(ctx) -> set[str]:
        rows = await DriveFile.select(DriveFile.id).where(owned_rows_where(ctx, DriveFile))
        return {ids[r["id"]] for r in rows if r["id"] in ids}

    assert await visible(maria) == {"deals", "none", "inventoryXitems", "employees2"}
    assert await visible(alice) == set(tagged) - {"employees", "deals+employees"}  # alice: no HR here
    assert await visible(admin) == set(tagged)
    hannah = await load_user_context_by_email("hannah@acme.example")
    assert await visible(hannah) == set()  # HR, but not alice's manager: private rows stay private
