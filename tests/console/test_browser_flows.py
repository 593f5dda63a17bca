"""Real headless Chromium against real servers: the assistant's token proposes a two-step flow, a person
reviews every step on the flow's approval screen and approves it, each step runs in a real VM, and the flow's
page shows what each step printed, concluded and wrote."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.console.test_browser import browser
from tests.support.browser import (
    POLL,
    RUN_TIMEOUT,
    api_as,
    assistant_token,
    body_text,
    screenshot,
    sign_in,
    wait_for_text,
)
from tests.support.console import FLOW_STEP_1, FLOW_STEP_2, demo_flow_body, flow_hashes
from tests.support.servers import Servers

__all__ = ["browser"]  # the headless Chromium fixture of the other browser tests, used here too
pytestmark = [pytest.mark.browser, pytest.mark.vm, pytest.mark.slow]

FLOW_TIMEOUT = 2 * RUN_TIMEOUT  # two VMs, one after the other
APPROVE = "//button[contains(normalize-space(.), 'Approve all 2 steps and run')]"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)  # waits for a build in progress; builds when missing
    running = Servers(tmp_path_factory.mktemp("browser-flows")).start()
    try:
        yield running
    finally:
        running.stop()


def propose_as_assistant(servers: Servers, token: str) -> dict:
    with httpx.Client(
        base_url=servers.api_url, timeout=60, headers={"Authorization": f"Bearer {token}"}
    ) as assistant:
        response = assistant.post("/api/flows", json=demo_flow_body())
        assert response.status_code == 201, response.text
        flow = response.json()
        # the token proposes; it can never approve, even with every hash right
        refused = assistant.post(f"/api/flows/{flow['id']}/approve", json=flow_hashes(flow))
        assert refused.status_code == 403 and refused.json()["error"] == "person_required", refused.text
    assert flow["status"] == "awaiting_approval" and flow["can_decide"] is False
    return flow


def wait_for_flow_end(servers: Servers, flow_id: int) -> dict:
    deadline = time.monotonic() + FLOW_TIMEOUT
    with api_as(servers, "alice@acme.example") as api:
        while time.monotonic() < deadline:
            flow = api.get(f"/api/flows/{flow_id}").json()
            if flow["status"] in ("succeeded", "failed"):
                return flow
            time.sleep(0.5)
    raise TimeoutError(f"flow {flow_id} did not finish within {FLOW_TIMEOUT}s\n{servers.log('api')}")


def test_person_approves_a_flow_the_assistant_proposed_and_sees_each_step_run(
    servers: Servers, browser
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    with api_as(servers, "admin@acme.example") as admin:
        assert admin.patch("/api/company/settings", json={"code_execution_enabled": True}).status_code < 400
    flow = propose_as_assistant(servers, assistant_token(servers, "alice@acme.example"))

    sign_in(driver, servers, "alice@acme.example")
    driver.find_element(By.XPATH, "//a[.//div[normalize-space(text())='Flows']]").click()
    wait_for_text(driver, "Pipeline review")
    assert "1 flow(s) wait for approval" in body_text(driver)
    screenshot(driver, "flows")
    driver.find_element(By.LINK_TEXT, "Pipeline review").click()

    # the approval screen: both capabilities, every step's code in full, then the decision
    wait_for_text(driver, "Before you decide:")
    chips = [c.text for c in driver.find_elements(By.CSS_SELECTOR, ".q-chip")]
    assert any(c.endswith("read") for c in chips) and any(c.endswith("propose_writes") for c in chips), chips
    cells = driver.find_elements(By.CSS_SELECTOR, ".cr-code td.code")
    assert all(c.is_displayed() for c in cells)
    # as the page holds it (test_browser.py: a blank line's span has no width, and visible text skips it)
    shown = [driver.execute_script("return arguments[0].textContent", c).strip() for c in cells]
    assert shown == [FLOW_STEP_1.strip(), FLOW_STEP_2.strip()]
    text = body_text(driver)
    assert "Step 1: Count deals per stage" in text and "Step 2: Propose the follow-up" in text
    assert "step 1's by_stage.csv" in text
    for step in flow["steps"]:
        assert f"code sha256 {step['run']['code_sha256']}" in text
        assert f"bundle sha256 {step['run']['bundle_sha256']}" in text
    approve = driver.find_element(By.XPATH, APPROVE)
    last_code = driver.find_elements(By.CSS_SELECTOR, ".cr-code")[-1]
    assert last_code.location["y"] < approve.location["y"]  # seen before the button
    screenshot(driver, "flow-approval")

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", approve)
    approve.click()
    wait_for_text(driver, "Approved by alice@acme.example")
    done = wait_for_flow_end(servers, flow["id"])
    assert done["status"] == "succeeded", [
        (s["run"]["status"], s["run"]["error_message"]) for s in done["steps"]
    ]

    # the page follows by itself: each step's status, printed output, conclusion and files
    wait_for_text(driver, "step 2 was handed", timeout=60)
    WebDriverWait(driver, 30, poll_frequency=POLL).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "img[src^='data:image/png;base64,']"),
        message="no chart preview",
    )
    deals = done["steps"][0]["conclusion"]["deals"]
    text = body_text(driver)
    assert f"step 1 counted {deals} deals" in text
    assert f'"handed_deals": {deals}' in text
    assert "flow_deals_per_stage.png" in text and "by_stage.csv" in text
    assert "Was handed at its start: step-1/conclusion.json" in text
    assert text.count("succeeded") >= 3  # the flow and both steps
    assert not driver.find_elements(By.XPATH, APPROVE)  # decided: no decision offered any more
    screenshot(driver, "flow-result")

    # each step links to its run, whose page links back to the flow
    step_2 = done["steps"][1]["run"]["id"]
    link = driver.find_element(By.LINK_TEXT, f"run #{step_2}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)  # clear of notifications
    link.click()
    wait_for_text(driver, f"step 2 of flow {flow['id']}")
    driver.find_element(By.LINK_TEXT, f"step 2 of flow {flow['id']}").click()
    wait_for_text(driver, "Steps, in the order they run")

    # the run history marks each step with its flow
    driver.get(servers.console_url + "/runs")
    wait_for_text(driver, f"flow {flow['id']} · step 2")
    assert f"flow {flow['id']} · step 1" in body_text(driver)
    screenshot(driver, "runs-with-flow-steps")

    # the audit trail links the flow's entries to its page
    sign_in(driver, servers, "admin@acme.example")
    driver.get(servers.console_url + "/audit")
    wait_for_text(driver, "flow.finished")
    assert driver.find_elements(By.CSS_SELECTOR, f"a[href='/flows/{flow['id']}']")
