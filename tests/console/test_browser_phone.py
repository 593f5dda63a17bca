"""The approval page on a phone (390x844) and on a desktop (1280x800), in real headless Chromium: on the
phone the navigation drawer starts closed and the run is what shows, nothing makes the page wider than the
screen (the code soft-wraps inside its own box, nothing of it out of sight), and Approve can be scrolled
to and pressed; on the desktop the drawer stands open beside the page. And the Drive page (issue 54), on these
same servers (a server start costs more than the test): a person uploads a file through the page's uploader,
sees it listed, deletes it to the trash and restores it. Needs no VM: the demo run only waits for approval."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.test_browser import browser
from tests.support.browser import POLL, api_as, sign_in, wait_for_text
from tests.support.servers import Servers

__all__ = ["browser"]  # the headless Chromium fixture of the other browser tests, used here too
pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
DESKTOP = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
APPROVE = "//button[contains(normalize-space(.), 'Approve and run')]"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    running = Servers(tmp_path_factory.mktemp("browser-phone")).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def screen(browser) -> Iterator[object]:
    """The browser with its viewport set per test, put back afterwards."""
    yield browser
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def open_waiting_run(driver, servers: Servers, metrics: dict) -> int:
    with api_as(servers, "maria@acme.example") as api:
        run_id = api.get("/api/runs", params={"status": "awaiting_approval"}).json()["items"][0]["id"]
    sign_in(
        driver, servers, "maria@acme.example"
    )  # at the browser's own size: it waits for the drawer's "Runs"
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    driver.get(f"{servers.console_url}/runs/{run_id}")
    wait_for_text(driver, "injection warning")
    wait_for_text(driver, "Approving binds to this exact code")  # the line under the two buttons
    return run_id


def rect(driver, element) -> dict:
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width};",
        element,
    )


def drawer_rect(driver) -> dict:
    from selenium.webdriver.common.by import By

    return rect(driver, driver.find_element(By.CSS_SELECTOR, "aside.q-drawer"))


def topmost_is_inside(driver, x: float, y: float, selector: str) -> bool:
    """Whether what a finger at (x, y) would touch belongs to `selector` (nothing lies over it)."""
    return driver.execute_script(
        "const hit = document.elementFromPoint(arguments[0], arguments[1]);"
        "return !!(hit && hit.closest(arguments[2]));",
        x,
        y,
        selector,
    )


def test_on_a_phone_the_run_shows_first_and_approve_is_within_reach(servers: Servers, screen) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = screen
    open_waiting_run(driver, servers, PHONE)
    width = driver.execute_script("return window.innerWidth")
    assert width == 390

    assert drawer_rect(driver)["right"] <= 0  # closed: slid out to the left
    page = driver.find_element(By.CSS_SELECTOR, ".cr-page")
    box = rect(driver, page)
    assert box["left"] >= 0 and box["right"] <= width
    assert topmost_is_inside(driver, width / 2, 300, ".cr-page")  # the run, not the drawer or its shade
    title = driver.find_element(
        By.XPATH, "//*[contains(@class, 'q-card')]//*[contains(text(), 'Open pipeline')]"
    )
    assert 0 <= rect(driver, title)["top"] < 844  # the run's name on the first screen

    # nothing makes the page wider than the phone, and nothing of the code sits out of sight past the code
    # box's right edge: the long lines soft-wrap (D-L7; they used to scroll sideways inside the box, where
    # `x = 1`, 300 spaces and a call read as one harmless line), each line numbered in its own first row
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width
    code = driver.find_element(By.CSS_SELECTOR, ".cr-code")
    assert rect(driver, code)["right"] <= width
    assert driver.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", code)
    lines = driver.execute_script(  # each line of the code: its box and what numbers it (one round trip)
        "return [...arguments[0].querySelectorAll('td.code pre > span[id^=\"cr-line-\"]')].map(l => {"
        "const r = l.getBoundingClientRect();"
        "return {height: r.height, right: r.right, number: getComputedStyle(l, '::before').content}; })",
        code,
    )
    heights = [line["height"] for line in lines]
    assert lines and max(heights) >= 2 * min(heights)  # a long line took rows of its own, a short one one row
    assert all(line["right"] <= rect(driver, code)["right"] for line in lines)
    assert {line["number"] for line in lines} == {"counter(cr-line)"}  # each line numbered in its first row

    # the run's story in reading order: plan, staged data, code, warnings, then the two buttons
    order = [
        "//*[normalize-space(text())='Plan']",
        "//*[normalize-space(text())='Data staged for this run']",
        "//*[starts-with(normalize-space(text()), 'The code, in full')]",
        "//*[contains(text(), 'staged data contains text that reads like instructions')]",
        APPROVE,
    ]
    tops = [rect(driver, driver.find_element(By.XPATH, xpath))["top"] for xpath in order]
    assert tops == sorted(tops)

    for label in (APPROVE, "//button[contains(normalize-space(.), 'Reject')]"):
        button = driver.find_element(By.XPATH, label)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
        box = rect(driver, button)
        assert box["left"] >= 0 and box["right"] <= width and box["top"] >= 0 and box["bottom"] <= 844
        middle = ((box["left"] + box["right"]) / 2, (box["top"] + box["bottom"]) / 2)
        assert driver.execute_script(
            "const hit = document.elementFromPoint(arguments[0], arguments[1]);"
            "return !!(hit && arguments[2].contains(hit));",
            *middle,
            button,
        ), f"something lies over {label}"
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width

    # positive control: the drawer is there, closed; the header's menu button opens it over the page
    driver.execute_script("window.scrollTo(0, 0)")
    driver.find_element(By.CSS_SELECTOR, ".cr-nav-toggle").click()
    WebDriverWait(driver, 10, poll_frequency=POLL).until(
        lambda d: drawer_rect(d)["left"] >= 0, message="the drawer did not open"
    )
    WebDriverWait(driver, 10, poll_frequency=POLL).until(
        lambda d: topmost_is_inside(d, 100, 300, "aside.q-drawer")
    )
    assert "Runs" in driver.find_element(By.CSS_SELECTOR, "aside.q-drawer").text.split("\n")


def test_on_a_desktop_the_drawer_stands_open_beside_the_run(servers: Servers, screen) -> None:
    from selenium.webdriver.common.by import By

    driver = screen
    open_waiting_run(driver, servers, DESKTOP)
    width = driver.execute_script("return window.innerWidth")
    assert width == 1280

    drawer = drawer_rect(driver)
    assert drawer["left"] == 0 and drawer["width"] >= 150  # open, at the left edge
    assert topmost_is_inside(driver, 50, 300, "aside.q-drawer")
    page = rect(driver, driver.find_element(By.CSS_SELECTOR, ".cr-page"))
    assert page["left"] >= drawer["right"]  # beside the run, not over it
    assert not driver.find_element(By.CSS_SELECTOR, ".cr-nav-toggle").is_displayed()
    # the phone's soft-wrap stays the phone's: a desktop keeps the line-number column
    assert driver.find_element(By.CSS_SELECTOR, ".cr-code td.linenos").is_displayed()
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width
    approve = driver.find_element(By.XPATH, APPROVE)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", approve)
    box = rect(driver, approve)
    assert box["left"] >= drawer["right"] and box["top"] >= 0 and box["bottom"] <= 800


# --- the Drive page -----------------------------------------------------------------------------------

NAME = "east-forecast.csv"


def _alice_drive(servers: Servers) -> tuple[set[str], set[str]]:
    """What the API itself says Alice has in Drive and in the trash (not what the page shows)."""
    with api_as(servers, "alice@acme.example") as api:
        files = {f["name"] for f in api.get("/api/drive/files", params={"all": "true"}).json()}
        trash = {f["name"] for f in api.get("/api/drive/trash").json()}
    return files, trash


def test_upload_see_delete_and_restore_on_the_drive_page(servers: Servers, browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    wait = WebDriverWait(driver, 30, poll_frequency=POLL)
    upload = tmp_path / NAME
    upload.write_bytes(b"region,forecast\nEast,1400\n")
    sign_in(driver, servers, "alice@acme.example")
    driver.get(servers.console_url + "/drive")
    wait_for_text(driver, "You keep")
    wait_for_text(driver, "The trash is empty.")

    driver.find_element(By.CSS_SELECTOR, ".q-uploader input[type=file]").send_keys(str(upload))
    row = f"//*[contains(@class, 'nicegui-row')][.//*[normalize-space(.)='{NAME}']]"
    wait.until(lambda d: d.find_elements(By.XPATH, f"{row}//button[@aria-label='Delete']"))
    assert NAME in _alice_drive(servers)[0]  # stored by the API as Alice

    driver.find_element(By.XPATH, f"{row}//button[@aria-label='Delete']").click()
    wait_for_text(driver, "Restore")  # the trash lists it
    files, trash = _alice_drive(servers)
    assert NAME not in files and NAME in trash

    driver.find_element(By.XPATH, "//button[contains(normalize-space(.), 'Restore')]").click()
    wait_for_text(driver, "The trash is empty.")
    wait.until(lambda d: d.find_elements(By.XPATH, f"{row}//button[@aria-label='Delete']"))
    files, trash = _alice_drive(servers)
    assert NAME in files and NAME not in trash
