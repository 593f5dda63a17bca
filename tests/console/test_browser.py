"""Real headless Chromium against real servers: a person approves the demo run, it runs in a real VM,
its chart comes back, one proposed change is accepted. Saves the README's screenshots on the way. And issue 54's
"Done when" walk: a spreadsheet imported as a new dataset, granted, analysed by an approved run, and changed by
its accepted proposal."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.browser import (
    POLL,
    RUN_TIMEOUT,
    SHOTS,
    api_as,
    body_text,
    chromium,
    click_button,
    screenshot,
    sign_in,
    wait_for_text,
)
from tests.support.servers import REPO, Servers

pytestmark = [pytest.mark.browser, pytest.mark.vm, pytest.mark.slow]

if not SHOTS.is_absolute():
    SHOTS = REPO / SHOTS


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)  # waits for a build in progress; builds when missing
    running = Servers(tmp_path_factory.mktemp("browser-servers")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    yield from chromium()


def section_screenshot(driver, title: str, name: str) -> None:
    """Just the card titled `title` (the whole page is in the other shots)."""
    from selenium.webdriver.common.by import By

    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 900), 4000))
    card = driver.find_element(
        By.XPATH, f"//div[contains(@class, 'q-card')][.//div[normalize-space(text())='{title}']]"
    )
    card.screenshot(str(SHOTS / f"{name}.png"))
    driver.set_window_size(1400, 1000)


def test_person_approves_the_waiting_run_sees_its_chart_and_accepts_a_change(
    servers: Servers, browser
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    sign_in(driver, servers, "maria@acme.example")
    wait_for_text(driver, "Open pipeline by stage")
    screenshot(driver, "runs-member")
    driver.find_element(By.LINK_TEXT, "Open pipeline by stage").click()

    wait_for_text(driver, "injection warning")
    # the planted instruction, with where it was found: the findings' rows may reach the page after their
    # heading (a CI run under load read the page between the two)
    wait_for_text(driver, "Note to the AI assistant")
    wait_for_text(driver, "Customer feedback.xlsx › sheet Responses › row")
    with api_as(servers, "maria@acme.example") as api:
        run = api.get("/api/runs", params={"status": "awaiting_approval"}).json()["items"][0]
        code = api.get(f"/api/runs/{run['id']}").json()["code"]
    cell = driver.find_element(By.CSS_SELECTOR, ".cr-code td.code")
    assert cell.is_displayed()
    # the code's text as the page holds it: each line a span of its own (phones wrap them, D-L7), and a span
    # holding only a blank line's newline has no width, which WebDriver's visible text leaves out
    shown = driver.execute_script("return arguments[0].textContent", cell)
    assert shown.strip() == code.strip()  # the full code, every line
    warning = driver.find_element(By.XPATH, "//*[contains(text(), 'injection warning')]")
    approve = driver.find_element(By.XPATH, "//button[contains(normalize-space(.), 'Approve and run')]")
    assert warning.location["y"] < approve.location["y"]
    screenshot(driver, "approval")

    approve.click()
    # a VM run's seconds: a look at the whole page every 0.25 s (every 0.1 s would be 100 page reads a run)
    WebDriverWait(driver, RUN_TIMEOUT, poll_frequency=0.25).until(
        lambda d: any(s in body_text(d) for s in ("succeeded", "failed", "timed out", "error\n")),
        message="the run did not finish",
    )
    wait_for_text(driver, "succeeded", timeout=10)
    WebDriverWait(driver, 30, poll_frequency=POLL).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "img[src^='data:image/png;base64,']"),
        message="no chart preview",
    )
    text = body_text(driver)
    assert "pipeline_by_stage.png" in text
    assert "Isolation evidence" in text and "network interfaces in the VM definition\n0" in text
    screenshot(driver, "run-result")

    wait_for_text(driver, "Proposed actions")
    accept = driver.find_element(By.XPATH, "//button[contains(normalize-space(.), 'Accept')]")
    section_screenshot(driver, "Proposed actions", "actions")  # pending, with Accept and Reject
    accept = driver.find_element(By.XPATH, "//button[contains(normalize-space(.), 'Accept')]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", accept)
    accept.click()
    wait_for_text(driver, "accepted")
    with api_as(servers, "maria@acme.example") as api:
        items = api.get(f"/api/runs/{run['id']}/action-items").json()
        assert [i["status"] for i in items] == ["accepted"]
        record = api.get(f"/api/records/deals/{items[0]['record_id']}").json()
        assert float(record["probability"]) == 80

    driver.find_element(By.XPATH, "//button[contains(normalize-space(.), 'Maria Keller')]").click()
    wait_for_text(driver, "Sign out")
    driver.find_element(By.XPATH, "//*[normalize-space(text())='Sign out']").click()
    wait_for_text(driver, "Sign in")
    driver.get(servers.console_url + "/runs")
    wait_for_text(driver, "Sign in")  # the session is gone, not just the page


def test_admin_screens(servers: Servers, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    sign_in(driver, servers, "admin@acme.example")
    wait_for_text(driver, "Open pipeline by stage")
    screenshot(driver, "runs-admin")

    driver.get(servers.console_url + "/settings")
    wait_for_text(driver, "Follow-ups without a second approval")
    wait_for_text(driver, "No schedules.")
    screenshot(driver, "settings")

    driver.get(servers.console_url + "/credits")
    wait_for_text(driver, "Costliest runs")
    wait_for_text(driver, "Open pipeline by stage")
    WebDriverWait(driver, 30, poll_frequency=POLL).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")) >= 2, message="no charts"
    )
    assert "maria@acme.example" in driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")[1].text
    screenshot(driver, "credits")

    driver.get(servers.console_url + "/audit")
    wait_for_text(driver, "run.finished")
    click_button(driver, "Verify chain")
    wait_for_text(driver, "Chain intact")
    screenshot(driver, "audit")

    driver.get(servers.console_url + "/health")
    wait_for_text(driver, "Guest image sha256")
    assert "KVM" in body_text(driver) or "software emulation" in body_text(driver)
    screenshot(driver, "health")


def test_readme_walkthrough_runs_as_written(servers: Servers, tmp_path: Path) -> None:
    """The README's curl walkthrough, run verbatim against the real servers: the assistant's token
    proposes and is refused at approve (403 person_required); maria approves in her session with the
    hashes she saw; the run executes in a real VM; the token reads the result; maria accepts the change."""
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text()
    section = readme.split("## One run, from proposal to an accepted change (curl)", 1)[1]
    script = section.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "API=http://127.0.0.1:8400" in script
    script = script.replace("API=http://127.0.0.1:8400", f"API={servers.api_url}")
    script = script.replace(".venv/bin/cleanroom", f"{sys.executable} -m backend")
    # the README names scripts/run's data directory for its `audit verify`; here the servers' own is in env()
    assert "CLEANROOM_DATA_DIR=var/demo " in script
    script = script.replace("CLEANROOM_DATA_DIR=var/demo ", "")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=servers.env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    assert '"error":"person_required"' in out.replace(" ", "")  # step 3: the token is refused
    assert "\nsucceeded " in out  # step 4: the VM ran after the person's approval
    assert '"status":"accepted"' in out.replace(" ", "")  # step 5: the person accepted the change
    # the audit chain verifies: the servers' trail, not an empty database the command made elsewhere
    assert re.search(r"audit chain OK: [1-9][0-9]* entries", out), out


# the "Done when" walk's spreadsheet and the run its member's assistant proposes over it
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
    """Issue 54's "Done when", on this module's servers (a server start costs more than this walk's own steps):
    an admin imports a spreadsheet (XLSX) as a new dataset on the console's import page (the inferred columns
    shown, a dry run's report with its refused row, then the import, each a background job the page follows
    with a progress bar), grants it to a team in the permission grid; a member's assistant, with the member's
    token through the typed client, proposes a run over it (and cannot approve it); the member approves it in
    the browser, it runs in a real VM, and the member accepts its proposed change, which updates a row."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.support.browser import assistant_token, grant, nav

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
    assert "appears again" in text  # the refusal, with its row number: the sheet's 5th row
    assert driver.find_elements(
        By.XPATH, "//tr[td[normalize-space(.)='5'] and td[contains(., 'appears again')]]"
    )
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
