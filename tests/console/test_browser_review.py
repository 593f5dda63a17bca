"""The review page in real headless Chromium: an auditor signs in, finds the demo's run that maria approved
despite its planted instruction in the "approved despite a warning" report (with its chart), and not a run
approved with no warning; the row's link opens the run; the run's timeline tells its story from the trail.
Needs no VM: what happens to the runs after their approval does not matter here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.test_browser import browser
from tests.support.browser import POLL, api_as, body_text, sign_in, wait_for_text
from tests.support.servers import Servers

__all__ = ["browser"]  # the headless Chromium fixture of the other browser tests, used here too
pytestmark = [pytest.mark.browser, pytest.mark.slow]

WARNED_REPORT = "Runs approved despite a high or medium warning"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    running = Servers(tmp_path_factory.mktemp("browser-review")).start()
    try:
        yield running
    finally:
        running.stop()


def approve(api, run_id: int) -> None:
    run = api.get(f"/api/runs/{run_id}").json()
    hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
    r = api.post(f"/api/runs/{run_id}/approve", json=hashes)
    assert r.status_code == 200, r.text


def card(driver, title: str):
    """The card titled `title` itself: the innermost card holding the title (a card around the reports holds
    it too, and comes first in the page; with the findings chart above this report, its first chart was that)."""
    from selenium.common.exceptions import NoSuchElementException
    from selenium.webdriver.common.by import By

    found = driver.find_elements(
        By.XPATH, f"//div[contains(@class, 'q-card')][.//div[normalize-space(text())='{title}']]"
    )
    if not found:
        raise NoSuchElementException(f"no card titled {title!r}")
    return found[-1]  # in document order an ancestor comes before what it holds


def in_card(driver, title: str, read):
    """`read(card)` on the card titled `title`, found again when the page replaced it meanwhile: the page
    renders its reports one after another, and a card found before a later one landed can be a stale node
    (seen once under load: "stale element reference" reading the text of a card found a moment before)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    answer: list = []

    def attempt(d) -> bool:
        answer[:] = [read(card(d, title))]
        return True

    WebDriverWait(
        driver, 30, poll_frequency=POLL, ignored_exceptions=(StaleElementReferenceException,)
    ).until(attempt)
    return answer[0]


def test_an_auditor_finds_the_demo_run_approved_despite_its_warning(servers: Servers, browser) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    REPLACED = (NoSuchElementException, StaleElementReferenceException)  # noqa: N806 - a constant of the test
    with api_as(servers, "maria@acme.example") as maria:
        demo = maria.get("/api/runs", params={"status": "awaiting_approval"}).json()["items"][0]
        findings = maria.get(f"/api/runs/{demo['id']}").json()["findings"]
        assert {f["severity"] for f in findings} & {"high", "medium"}  # the planted instruction
        approve(maria, demo["id"])
    with api_as(servers, "alice@acme.example") as alice:
        clean = alice.post(
            "/api/runs",
            json={
                "conversation_id": "c",
                "title": "Quiet count",
                "plan": "",
                "code": "print(1)\n",
                "datasets": ["deals"],
            },
        ).json()
        assert clean["findings"] == []
        approve(alice, clean["id"])
    with api_as(servers, "admin@acme.example") as admin:
        frank = next(
            p["id"] for p in admin.get("/api/company/people").json() if p["email"] == "frank@acme.example"
        )
        assert admin.patch(f"/api/company/people/{frank}", json={"role": "auditor"}).status_code == 200

    driver = browser
    sign_in(driver, servers, "frank@acme.example")
    driver.get(servers.console_url + "/audit")
    wait_for_text(driver, WARNED_REPORT)
    link_path = f"//a[@href='/runs/{demo['id']}']"
    WebDriverWait(driver, 60, poll_frequency=POLL, ignored_exceptions=REPLACED).until(
        lambda d: card(d, WARNED_REPORT).find_elements(By.XPATH, "." + link_path), message="no report row"
    )
    report = in_card(driver, WARNED_REPORT, lambda c: c.text)
    assert "Open pipeline by stage" in report and "maria@acme.example" in report
    assert "Quiet count" not in report  # approved, but shown no warning
    WebDriverWait(driver, 30, poll_frequency=POLL, ignored_exceptions=REPLACED).until(
        lambda d: card(d, WARNED_REPORT).find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg"),
        message="no chart",
    )
    chart = in_card(driver, WARNED_REPORT, lambda c: c.find_element(By.CSS_SELECTOR, ".js-plotly-plot").text)
    assert "maria@acme.example" in chart

    def open_row(found) -> bool:
        link = found.find_element(By.XPATH, "." + link_path)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        return True

    in_card(driver, WARNED_REPORT, open_row)
    WebDriverWait(driver, 30, poll_frequency=POLL).until(
        lambda d: d.current_url.endswith(f"/runs/{demo['id']}")
    )
    wait_for_text(driver, f"Run #{demo['id']}")
    wait_for_text(driver, "Approved by maria@acme.example")

    driver.get(f"{servers.console_url}/audit?run={demo['id']}")
    wait_for_text(driver, f"Timeline of run #{demo['id']}")
    wait_for_text(driver, "approved by maria@acme.example (session)")
    text = body_text(driver)
    assert text.index("staged data scanned") < text.index("approved by maria@acme.example (session)")
