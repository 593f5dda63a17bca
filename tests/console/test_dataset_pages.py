"""The console's Datasets page through NiceGUI's simulated user against the real API (issue 54): an admin defines a
dataset from one of the built-ins as a template, and it lands in the API; the dataset's sync source shows its
status, and "Sync now" starts a job the page follows to its end, then shows why the sync failed (never the
connection string). A member is kept off the page (the API refuses them anyway: tests/records/test_import_jobs.py).
The import page is walked in the real browser (test_browser_datasets.py)."""

from __future__ import annotations

import pytest
from nicegui.testing.user import User

from backend.records import jobs
from tests.support.console import Assistant, sign_in

pytestmark = pytest.mark.sqlite


async def test_an_admin_defines_a_dataset_from_a_template_and_syncs_it(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, "bob@acme.example", then="/datasets")
    await user.should_not_see(marker="define-dataset")  # a member: sent back to the runs
    await user.open("/logout")
    user.find(marker="confirm-sign-out").click()
    await user.should_see(marker="email", retries=50)

    await sign_in(user, "admin@acme.example", then="/datasets")
    await user.should_see(marker="define-name", retries=50)
    user.find(marker="define-name").type("work_items")
    user.find(marker="define-label").type("Work items")
    user.find(marker="define-template").click()
    user.find("Tasks (tasks)").click()
    user.find(marker="define-submit").click()
    await user.should_see(marker="dataset-work_items", retries=50)
    made = await assistant.call("admin@acme.example", "GET", "/api/datasets/work_items")
    assert made["template"] == "tasks" and made["label"] == "Work items" and made["columns"]

    secret = "postgresql://syncer:pw-page-never-77@127.0.0.1:1/erp"
    await assistant.call(
        "admin@acme.example",
        "PUT",
        "/api/datasets/work_items/source",
        json={"connection": secret, "table": "t"},
    )
    await user.open("/datasets")
    await user.should_see(marker="sync-work_items", retries=50)
    user.find(marker="sync-work_items").click()
    await user.should_see(marker="sync-job-work_items", retries=50)
    await jobs.drain()  # what the worker does; the page polls the job until it ends
    await user.should_see(marker="source-error-work_items", retries=100)
    await user.should_see("cannot be reached")
    await user.should_not_see("pw-page-never-77")


async def test_a_member_imports_only_into_a_dataset_granted_to_them(user: User, assistant: Assistant) -> None:
    """Hostile: a member with no edit on any company dataset is offered none to import into (and cannot define
    one: no new-dataset choice). Control: granted edit on one, it is offered to them."""
    body = {"name": "claims", "label": "Claims", "columns": [{"name": "claim_id", "kind": "string"}]}
    await assistant.call(
        "admin@acme.example", "POST", "/api/datasets/", json={**body, "key_column": "claim_id"}
    )
    await sign_in(user, "bob@acme.example", then="/datasets/import")
    await user.should_see(marker="import-nothing", retries=50)
    await user.should_not_see("A new dataset")
    grid = await assistant.call("admin@acme.example", "GET", "/api/company/permissions")
    bob = next(p["id"] for p in grid["people"] if p["email"] == "bob@acme.example")
    await assistant.call(
        "admin@acme.example",
        "PUT",
        "/api/company/permissions",
        json={"people": {str(bob): {"claims": "edit"}}},
    )
    await user.open("/datasets/import?name=claims")
    await user.should_see("Claims (claims)", retries=50)
    await user.should_not_see(marker="import-nothing")
