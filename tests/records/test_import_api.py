"""The import API as the console uses it: an admin's session previews, dry-runs and imports a file as a new
dataset, each run as a background job (202, then the job's report); the assistant's token is refused at every
import, job and sync route (and an admin's token too), and what the API shows of a sync source never holds the
connection string."""

from __future__ import annotations

import json

import pytest

from backend.records import jobs
from tests.support.http import login, token_for

CSV = b"Order ID,Amount,Paid\nO-1,10.5,true\nO-2,x,false\nO-3,7,false\n"


@pytest.mark.sqlite
async def test_admin_imports_a_new_dataset_over_the_api_and_tokens_are_refused(client) -> None:
    headers = await token_for(client, "admin@acme.example")  # the admin's own token: still not a person
    refused = await client.post(
        "/api/datasets/import/preview", files={"file": ("o.csv", CSV, "text/csv")}, headers=headers
    )
    assert refused.status_code == 403 and refused.json()["error"] == "person_required"
    refused = await client.post(
        "/api/datasets/orders/import",
        files={"file": ("o.csv", CSV, "text/csv")},
        data={"dry_run": "false"},
        headers=headers,
    )
    assert refused.status_code == 403 and refused.json()["error"] == "person_required"
    for method, path in (
        ("get", "/api/datasets/orders/source"),
        ("post", "/api/datasets/orders/sync"),
        ("get", "/api/datasets/jobs/1"),
    ):
        answer = await getattr(client, method)(path, headers=headers)
        assert answer.status_code == 403 and answer.json()["error"] == "person_required"

    await login(client, "admin@acme.example")
    preview = await client.post("/api/datasets/import/preview", files={"file": ("o.csv", CSV, "text/csv")})
    assert preview.status_code == 200, preview.text
    columns = preview.json()["columns"]
    assert [(c["name"], c["kind"]) for c in columns] == [
        ("order_id", "string"),
        ("amount", "string"),
        ("paid", "boolean"),
    ]  # "x" makes amount text: shown before anything is written, for the admin to correct
    columns[1].update(kind="number", max_length=None)
    form = {"dry_run": "true", "label": "Orders", "key_column": "order_id", "columns": json.dumps(columns)}
    dry = await client.post(
        "/api/datasets/orders/import", files={"file": ("o.csv", CSV, "text/csv")}, data=form
    )
    assert dry.status_code == 202, dry.text
    assert dry.json()["state"] == "queued" and dry.json()["dry_run"] is True
    await jobs.drain()  # what the worker does
    ended = (await client.get(f"/api/datasets/jobs/{dry.json()['id']}")).json()
    assert ended["state"] == "done" and ended["rows_read"] == 3, ended
    body = ended["report"]
    assert (body["added"], body["refused"], body["applied"]) == (2, 1, False)
    assert body["refusals"] == [{"row": 3, "reason": body["refusals"][0]["reason"]}]
    assert "amount" in body["refusals"][0]["reason"]
    form["dry_run"] = "false"
    done = await client.post(
        "/api/datasets/orders/import", files={"file": ("o.csv", CSV, "text/csv")}, data=form
    )
    assert done.status_code == 202 and done.json()["rows_total"] == 3  # the dry run of this file counted it
    await jobs.drain()
    ended = (await client.get(f"/api/datasets/jobs/{done.json()['id']}")).json()
    assert ended["state"] == "done" and ended["report"]["added"] == 2 and ended["report"]["applied"], ended
    rows = await client.get("/api/records/orders")
    assert rows.status_code == 200 and rows.json()["total"] == 2

    # a sync source: set, shown without its connection string
    secret = "postgresql://someone:s3cret-pw-123@db.example:5432/erp"
    put = await client.put(
        "/api/datasets/orders/source", json={"connection": secret, "table": "public.orders"}
    )
    assert put.status_code == 200, put.text
    shown = await client.get("/api/datasets/orders/source")
    assert shown.status_code == 200 and shown.json()["connection"] == "set (hidden)"
    assert "s3cret" not in put.text + shown.text
