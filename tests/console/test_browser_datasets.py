"""Issue 54's "Done when", in real headless Chromium against real servers (the API, its local worker process
and the console, as `cleanroom serve` runs them): an admin imports a spreadsheet (XLSX) as a new dataset on the
console's import page (the inferred columns shown, a dry run's report with its refused row, then the import,
each a background job followed to its end), grants it to a team in the permission grid; a member's assistant,
with the member's token through the typed client, proposes a run over it (and cannot approve it); the member
approves it in the browser, it runs in a real VM, and the member accepts its proposed change, which updates a
row of the dataset."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.console.servers import Servers
from tests.console.test_browser import (
    RUN_TIMEOUT,
    api_as,
    body_text,
    browser,
    click_button,
    sign_in,
    wait_for_text,
)
from tests.console.test_browser_flows import assistant_token
from tests.console.test_browser_onboarding import grant, nav

__all__ = ["browser"]  # the headless Chromium fixture of the other browser tests, used here too
pytestmark = [pytest.mark.browser, pytest.mark.vm, pytest.mark.slow]

ROWS = [
    ("Shipment ID", "Destination", "Weight kg", "Status"),
    ("S-1", "Berlin", 12.5, "open"),
    ("S-2", "Paris", 3, "open"),
    ("S-3", "Rome", 7.25, "open"),
    ("S-2", "Paris again", 1, "open"),  # the key again: refused, with its row number
]
CODE = """\
import csv
import json

rows = list(csv.DictReader(open("/work/input/datasets/shipments.csv")))
print(f"{len(rows)} shipments staged")
late = next(r for r in rows if r["shipment_id"] == "S-2")
actions = [{
    "op": "update",
    "dataset": "shipments",
    "record_id": int(late["id"]),
    "changes": {"status": "delayed"},
    "reason": "The carrier reported S-2 late.",
}]
json.dump(actions, open("/work/output/actions.json", "w"))
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)  # waits for a build in progress; builds when missing
    running = Servers(tmp_path_factory.mktemp("browser-datasets")).start()
    try:
        yield running
    finally:
        running.stop()


def spreadsheet(path: Path) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    for row in ROWS:
        book.active.append(row)
    book.save(path)
    return path


def propose_as_assistant(servers: Servers, token: str) -> dict:
    """The member's assistant proposes through the typed client with the member's token; it cannot approve."""
    from backend.client import CleanroomClient

    body = {
        "conversation_id": "shipments-1",
        "title": "Late shipments",
        "plan": "Read the shipments and mark the late one as delayed.",
        "code": CODE,
        "datasets": ["shipments"],
        "files": [],
    }

    async def go() -> dict:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=servers.api_url, headers=headers, timeout=60) as http:
            assistant = CleanroomClient(http)
            run = await assistant.propose_run(body)
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await assistant.approve(run.id, run.code_sha256, run.bundle_sha256)
            assert refused.value.response.json()["error"] == "person_required"
            return run.model_dump(mode="json")

    return asyncio.run(go())


def test_an_imported_spreadsheet_is_granted_analysed_and_changed(
    servers: Servers, browser, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    # 1. the admin imports the spreadsheet as a new dataset: columns inferred, a dry run, then the import
    sign_in(driver, servers, "admin@acme.example")
    nav(driver, "Datasets")
    wait_for_text(driver, "Define a dataset")
    click_button(driver, "Import a spreadsheet")
    wait_for_text(driver, "Into which dataset")
    driver.find_element(By.XPATH, '//input[@aria-label="New dataset\'s name (lowercase)"]').send_keys(
        "shipments"
    )
    upload = spreadsheet(tmp_path / "Shipments.xlsx")
    driver.find_element(By.CSS_SELECTOR, ".q-uploader input[type=file]").send_keys(str(upload))
    wait_for_text(driver, "Columns of Shipments.xlsx")
    text = body_text(driver)
    for column in ("shipment_id", "destination", "weight_kg", "status"):
        assert column in text
    click_button(driver, "Dry run")
    wait_for_text(driver, "Dry run (nothing written)")
    text = body_text(driver)
    assert "4 rows read — 3 added, 0 changed, 0 unchanged, 1 refused" in text, text
    assert "appears again" in text  # the refusal, with its row number (the sheet's 5th row)
    with api_as(servers, "admin@acme.example") as api:
        assert api.get("/api/datasets/shipments").status_code == 404  # a dry run defines nothing
    click_button(driver, "Import")
    wait_for_text(driver, "Imported:")
    assert "3 added" in body_text(driver)

    # 2. granted to the East team (maria manages it) in the permission grid
    nav(driver, "Teams and permissions")
    wait_for_text(driver, "Dataset permissions")
    wait_for_text(driver, "shipments")
    grant(driver, "Team East", "shipments", "edit")
    click_button(driver, "Save permissions")
    wait_for_text(driver, "Permissions saved")

    # 3. maria's assistant proposes a run over it; 4. maria approves it, it runs in a VM
    run = propose_as_assistant(servers, assistant_token(servers, "maria@acme.example"))
    sign_in(driver, servers, "maria@acme.example")
    driver.get(f"{servers.console_url}/runs/{run['id']}")
    wait_for_text(driver, "Approving binds to this exact code")
    click_button(driver, "Approve and run")
    WebDriverWait(driver, RUN_TIMEOUT, poll_frequency=1).until(
        lambda d: any(s in body_text(d) for s in ("succeeded", "failed", "timed out", "error\n")),
        message="the run did not finish",
    )
    wait_for_text(driver, "succeeded", timeout=10)
    assert "3 shipments staged" in body_text(driver)

    # 5. she accepts its proposed change: the row changes
    wait_for_text(driver, "Proposed actions")
    accept = driver.find_element(By.XPATH, "//button[contains(normalize-space(.), 'Accept')]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", accept)
    accept.click()
    wait_for_text(driver, "accepted")
    with api_as(servers, "maria@acme.example") as api:
        rows = api.get("/api/records/shipments").json()["items"]
    status = {row["shipment_id"]: row["status"] for row in rows}
    assert status == {"S-1": "open", "S-2": "delayed", "S-3": "open"}, status
