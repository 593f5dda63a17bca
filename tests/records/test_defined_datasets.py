"""Company-defined datasets (issue 54): defining them is an admin's decision in a session, confined to the
company; their rows go through the one visibility rule and per-dataset permissions; proposed changes reach
them with the kind, writable-column and version checks of the built-ins. Each hostile case beside its control."""

from __future__ import annotations

import json

import pytest

from backend.actions import service as actions
from backend.audit.tables import AuditEntry
from backend.records import defined
from backend.records.tables import DatasetRow
from backend.runs.tables import Run
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Company, PermissionSet
from tests.support.http import decide_item_as, login, token_for
from tests.support.runs import enable_code, proposal

SHIPMENTS = {
    "name": "shipments",
    "label": "Shipments",
    "columns": [
        {"name": "ref", "kind": "string"},
        {"name": "status", "kind": "string", "enum": ["booked", "in_transit", "delivered"]},
        {"name": "weight_kg", "kind": "number"},
        {"name": "pieces", "kind": "integer"},
        {"name": "note", "kind": "string"},
    ],
    "key_column": "ref",
    "writable": ["status", "pieces", "note"],
}


async def _define_as_admin(client, email: str = "admin@acme.example", body: dict | None = None) -> dict:
    await login(client, email)
    r = await client.post("/api/datasets/", json=body or SHIPMENTS)
    assert r.status_code == 201, r.text
    client.cookies.clear()
    return r.json()


async def _fill(company: str = "admin@acme.example") -> defined.DefinedDataset:
    admin = await load_user_context_by_email(company)
    dataset = await defined.get_defined(admin.company_id, "shipments")
    rows = [
        {
            "ref": "S1",
            "status": "booked",
            "weight_kg": "1.5",
            "pieces": "2",
            "owner_email": "alice@acme.example",
            "visibility": "private",
        },
        {
            "ref": "S2",
            "status": "booked",
            "pieces": "1",
            "owner_email": "bob@acme.example",
            "visibility": "private",
        },
        {"ref": "S3", "status": "delivered", "note": "x"},
    ]
    if company != "admin@acme.example":
        rows = [{k: v for k, v in r.items() if k != "owner_email"} for r in rows]
    result = await defined.upsert_rows(dataset, rows, defined.RowDefaults(admin.user_id))
    assert result.added == 3 and not result.refused, result
    return dataset


async def _grant(set_name: str, dataset: str, level: str, company: str = "Acme Analytics") -> None:
    company_id = (await Company.select(Company.id).where(Company.name == company).first())["id"]
    row = (
        await PermissionSet.select()
        .where((PermissionSet.company == company_id) & (PermissionSet.name == set_name))
        .first()
    )
    grants = json.loads(row["grants"]) if isinstance(row["grants"], str) else row["grants"]
    await PermissionSet.update({PermissionSet.grants: {**grants, dataset: level}}).where(
        PermissionSet.id == row["id"]
    )


@pytest.mark.sqlite
async def test_only_an_admin_in_a_session_defines_a_dataset(client) -> None:
    # the member, signed in: refused, nothing defined
    await login(client, "alice@acme.example")
    r = await client.post("/api/datasets/", json=SHIPMENTS)
    assert r.status_code == 403, r.text
    client.cookies.clear()
    # the admin's own assistant token: refused (a person's decision), nothing defined
    token = await token_for(client, "admin@acme.example")
    r = await client.post("/api/datasets/", json=SHIPMENTS, headers=token)
    assert r.status_code == 403 and r.json()["error"] == "person_required", r.text
    assert not await DatasetRow.count()
    admin = await load_user_context_by_email("admin@acme.example")
    with pytest.raises(Exception, match="no dataset"):
        await defined.get_defined(admin.company_id, "shipments")
    # control: the admin, signed in, defines it; audited
    info = await _define_as_admin(client)
    assert info["origin"] == "company" and info["key_column"] == "ref"
    assert {c["name"]: c["kind"] for c in info["columns"]}["weight_kg"] == "number"
    audited = await AuditEntry.select().where(AuditEntry.action == "dataset.defined")
    assert [(a["actor"], a["subject_id"]) for a in audited] == [("admin@acme.example", "shipments")]
    # a bad definition: a clear refusal naming the problem, nothing defined
    await login(client, "admin@acme.example")
    bad = {**SHIPMENTS, "name": "claims", "key_column": "nope", "columns": [{"name": "id", "kind": "string"}]}
    r = await client.post("/api/datasets/", json=bad)
    assert r.status_code in (400, 422) and "key column" in r.text and "'id'" in r.text
    r = await client.post("/api/datasets/", json={"name": "deals", "label": "x", "template": "deals"})
    assert r.status_code in (400, 422) and "built-in" in r.text
    # a built-in as template: its columns and kinds
    r = await client.post(
        "/api/datasets/", json={"name": "my_deals", "template": "deals", "key_column": "name"}
    )
    assert r.status_code == 201, r.text
    assert "stage" in r.json()["writable"] and r.json()["template"] == "deals"


@pytest.mark.sqlite
async def test_another_companys_dataset_is_404_and_nothing_leaks(client) -> None:
    await _define_as_admin(client)
    await _fill()
    # Globex's admin and member: the name is unknown to them, in the API, the listing, the definitions
    for email in ("admin@globex.example", "gina@globex.example"):
        await login(client, email)
        assert (await client.get("/api/records/shipments")).status_code == 404
        assert (await client.get("/api/records/shipments/1")).status_code == 404
        assert (await client.get("/api/datasets/shipments")).status_code == 404
        assert "shipments" not in [d["name"] for d in (await client.get("/api/records/")).json()]
        assert (await client.get("/api/datasets/")).json() == []
        client.cookies.clear()
    # Globex defines its own `shipments`: its own rows only, Acme's none
    await _define_as_admin(client, "admin@globex.example")
    await _fill("admin@globex.example")
    await login(client, "admin@globex.example")
    page = (await client.get("/api/records/shipments")).json()
    gx = await load_user_context_by_email("admin@globex.example")
    assert page["total"] == 3 and {i["owner_id"] for i in page["items"]} == {gx.user_id}
    globex_ids = {i["id"] for i in page["items"]}
    client.cookies.clear()
    # control: Acme's admin sees Acme's three rows, none of Globex's
    await login(client, "admin@acme.example")
    page = (await client.get("/api/records/shipments")).json()
    assert page["total"] == 3 and not globex_ids & {i["id"] for i in page["items"]}
    for gid in globex_ids:
        assert (await client.get(f"/api/records/shipments/{gid}")).status_code == 404


@pytest.mark.sqlite
async def test_rows_keep_their_owners_and_the_dataset_permission_applies(client) -> None:
    await _define_as_admin(client)
    await _fill()
    # alice holds no permission on it yet: 403, and listed without access
    await login(client, "alice@acme.example")
    assert (await client.get("/api/records/shipments")).status_code == 403
    listed = {d["name"]: d for d in (await client.get("/api/records/")).json()}
    assert listed["shipments"]["access"] is None and listed["shipments"]["types"]["pieces"] == "integer"
    client.cookies.clear()
    # the admin grants it to the East team through the permission grid (issue 53's), by its name
    await login(client, "admin@acme.example")
    grid = (await client.get("/api/company/permissions")).json()
    assert "shipments" in grid["datasets"]
    east = next(t["id"] for t in grid["teams"] if t["name"] == "East")
    r = await client.put("/api/company/permissions", json={"teams": {str(east): {"shipments": "read"}}})
    assert r.status_code == 200, r.text
    client.cookies.clear()
    # alice (East): her own private row and the company row, never bob's private one
    await login(client, "alice@acme.example")
    page = (await client.get("/api/records/shipments")).json()
    assert sorted(i["ref"] for i in page["items"]) == ["S1", "S3"]
    me = (await client.get("/api/me/")).json()
    assert me["permissions"].get("shipments") == "read"
    client.cookies.clear()
    # bob (West) holds no grant on it: 403, although the company row is there
    await login(client, "bob@acme.example")
    assert (await client.get("/api/records/shipments")).status_code == 403
    client.cookies.clear()
    await _grant("Sales", "shipments", "read")  # now bob too: his own private row and the company row
    await login(client, "bob@acme.example")
    assert sorted(i["ref"] for i in (await client.get("/api/records/shipments")).json()["items"]) == [
        "S2",
        "S3",
    ]
    client.cookies.clear()
    await login(client, "maria@acme.example")  # alice's manager: her private row too, never bob's
    assert sorted(i["ref"] for i in (await client.get("/api/records/shipments")).json()["items"]) == [
        "S1",
        "S3",
    ]


@pytest.mark.sqlite
async def test_proposed_changes_to_a_company_dataset_are_checked_like_a_builtins(client) -> None:
    await enable_code()
    await _define_as_admin(client)
    dataset = await _fill()
    await _grant("Sales", "shipments", "edit")
    alice = await token_for(client, "alice@acme.example")
    run = (await client.post("/api/runs", json=proposal(datasets=["shipments"]), headers=alice)).json()
    assert "id" in run, run
    row = await Run.select().where(Run.id == run["id"]).output(load_json=True).first()
    ctx = await load_user_context_by_email("alice@acme.example")
    s1 = (
        await DatasetRow.select()
        .where((DatasetRow.dataset == dataset.id) & (DatasetRow.external_key == "S1"))
        .first()
    )
    s2 = (
        await DatasetRow.select()
        .where((DatasetRow.dataset == dataset.id) & (DatasetRow.external_key == "S2"))
        .first()
    )
    entries = [
        {"op": "update", "dataset": "shipments", "record_id": s1["id"], "changes": {"pieces": 7}},  # valid
        {
            "op": "update",
            "dataset": "shipments",
            "record_id": s1["id"],
            "changes": {"weight_kg": 3},
        },  # not writable
        {
            "op": "update",
            "dataset": "shipments",
            "record_id": s1["id"],
            "changes": {"pieces": "many"},
        },  # kind
        {
            "op": "update",
            "dataset": "shipments",
            "record_id": s1["id"],
            "changes": {"status": "lost"},
        },  # enum
        {
            "op": "update",
            "dataset": "shipments",
            "record_id": s2["id"],
            "changes": {"pieces": 1},
        },  # bob's private
        {"op": "update", "dataset": "shipments", "record_id": s1["id"], "changes": {"note": "stale later"}},
        {
            "op": "create",
            "dataset": "shipments",
            "changes": {"status": "booked"},
        },  # no key: not writable anyway
    ]
    await actions.ingest(row, entries, ctx)
    items = (await client.get(f"/api/runs/{run['id']}/action-items", headers=alice)).json()
    assert [i["status"] for i in items] == [
        "pending",
        "invalid",
        "invalid",
        "invalid",
        "invalid",
        "pending",
        "invalid",
    ]
    problems = [i["problem"] for i in items]
    assert "not writable" in problems[1] and "whole number" in problems[2] and "must be one of" in problems[3]
    assert "not visible" in problems[4]
    assert items[0]["before"] == {"pieces": 2}
    # control: the valid change is accepted and bumps the version; the value is what was proposed
    r = await decide_item_as(client, "alice@acme.example", items[0]["id"])
    assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    after = await DatasetRow.select().where(DatasetRow.id == s1["id"]).first()
    values = json.loads(after["values"]) if isinstance(after["values"], str) else after["values"]
    assert after["version"] == s1["version"] + 1 and values["pieces"] == 7 and values["weight_kg"] == "1.5"
    # the other item was staged against the old version: a conflict, nothing written
    r = await decide_item_as(client, "alice@acme.example", items[5]["id"])
    assert r.status_code == 409, r.text
    again = await DatasetRow.select().where(DatasetRow.id == s1["id"]).first()
    assert again["values"] == after["values"] and again["version"] == after["version"]


def test_the_export_writes_stored_text_exactly_as_the_typed_values_would() -> None:
    """The CSV export of a company-defined dataset skips converting numbers, dates and datetimes (they are
    stored as the text the CSV writes); the bytes equal those of the typed rows the records API returns, on
    awkward values. Control: a value stored in another spelling would differ (the comparison can fail)."""
    import datetime as dt
    from decimal import Decimal

    from backend.records.columns import ColumnKind as K
    from backend.records.datasets import DefinedDataset
    from backend.records.export import build_export
    from backend.records.values import ColumnSpec, coerce_value, to_json

    specs = (
        ColumnSpec("ref", K.string),
        ColumnSpec("amount", K.number),
        ColumnSpec("on", K.date),
        ColumnSpec("at", K.datetime),
        ColumnSpec("ok", K.boolean),
        ColumnSpec("n", K.integer),
    )
    ds = DefinedDataset(1, 1, "s", "S", specs, "ref", ())
    raw = [
        {
            "ref": 'a,"b"\n',
            "amount": "1.50",
            "on": "2026-01-02",
            "at": "2026-01-02T03:04:05.123456+02:00",
            "ok": "true",
        },
        {"ref": "c", "amount": "-0.000", "at": "2026-01-02 03:04", "n": "-7"},
        {"ref": "d", "amount": "1E+2", "ok": "0"},
    ]
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [
        {
            "id": i,
            "values": json.dumps(
                {s.name: to_json(coerce_value(s, r.get(s.name), from_text=True)) for s in specs}
            ),
            "owner_id": 1,
            "team_id": None,
            "visibility": "company",
            "created_at": now,
            "updated_at": now,
            "version": 1,
        }
        for i, r in enumerate(raw, start=1)
    ]
    typed = ds.decode(rows)
    assert typed[0]["amount"] == Decimal("1.50") and isinstance(typed[0]["at"], dt.datetime)
    assert build_export(ds, typed).csv == build_export(ds, ds.decode(rows, typed=False)).csv
    respelled = [{**rows[0], "values": rows[0]["values"].replace('"1.50"', '"1.5"')}]
    assert build_export(ds, ds.decode(respelled)).csv != build_export(ds, ds.decode(rows[:1])).csv


@pytest.mark.sqlite
async def test_an_output_computed_from_a_company_dataset_is_withheld_as_a_builtins_would_be(client) -> None:
    """A run's output tagged with a company-defined dataset is hidden from whoever may not read that dataset,
    by the same rule as a built-in's tag (records/visibility.py `unreadable_sources`, Drive's WHERE clause):
    the hostile reader is bob (West, no grant on shipments), the controls alice once East holds it, and the
    admin. A tag that names no dataset still hides nothing."""
    from backend.drive import service as drive
    from backend.drive.tables import DriveFile
    from backend.records.visibility import unreadable_sources

    await _define_as_admin(client)
    await login(client, "admin@acme.example")
    grid = (await client.get("/api/company/permissions")).json()
    east = next(t["id"] for t in grid["teams"] if t["name"] == "East")
    r = await client.put("/api/company/permissions", json={"teams": {str(east): {"shipments": "read"}}})
    assert r.status_code == 200, r.text
    client.cookies.clear()
    admin = await load_user_context_by_email("admin@acme.example")
    # a run's output shared company-wide, computed from shipments; and one from a tag that names no dataset
    for name, tags in (("by-route.csv", ["shipments"]), ("other.csv", ["shipments2"])):
        await drive._file_row(admin, name, "0" * 64, 10, "csv", None, "company", None, tags)
    bob = await load_user_context_by_email("bob@acme.example")
    alice = await load_user_context_by_email("alice@acme.example")
    assert bob.company_datasets == frozenset({"shipments"})
    assert unreadable_sources(bob, ["shipments", "deals", "shipments2"]) == ["shipments"]
    assert unreadable_sources(alice, ["shipments", "deals"]) == []  # control: East reads it
    assert unreadable_sources(admin, ["shipments"]) == []

    async def names(email: str) -> set[str]:
        await login(client, email)
        r = await client.get("/api/drive/files")
        client.cookies.clear()
        assert r.status_code == 200, r.text
        body = r.json()
        items = body["items"] if isinstance(body, dict) else body
        return {f["name"] for f in items}

    assert "by-route.csv" not in await names("bob@acme.example")
    assert "other.csv" in await names("bob@acme.example")
    assert {"by-route.csv", "other.csv"} <= await names("alice@acme.example")
    assert {"by-route.csv", "other.csv"} <= await names("admin@acme.example")
    assert await DriveFile.count() >= 2
