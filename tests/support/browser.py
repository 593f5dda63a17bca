"""Headless Chromium through Selenium against the real servers: start it, sign in, wait for text, click, screenshot
(the browser tests; all in the serial group)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.servers import Servers

# The README's screenshots are refreshed only on request (CLEANROOM_SCREENSHOT_DIR=docs/screenshots), so an
# ordinary test run never rewrites tracked files.
SHOTS = Path(os.environ.get("CLEANROOM_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="cleanroom-shots-"))


CHROMIUM = Path("/usr/bin/chromium")


CHROMEDRIVER = Path("/usr/bin/chromedriver")


RUN_TIMEOUT = 600  # a cold VM boot under software emulation is slow; KVM takes seconds


# how often a wait looks at the page again: a look is one WebDriver round trip (a few ms), and each wait ends
# at most this long after the page got there (0.5 s, WebDriverWait's default, cost the walks ~0.25 s a wait)
POLL = 0.1


def chromium(*extra_flags: str) -> Iterator[object]:
    """Headless Chromium on a fresh profile (the flags that keep it off this machine's closed network), with
    `extra_flags` after them; skips when Debian's chromium and chromium-driver are not installed."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("chromium and chromium-driver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="cleanroom-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        *extra_flags,
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def body_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def wait_for_text(driver, text: str, timeout: float = 30) -> None:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # a navigation can replace <body> between finding it and reading it: look again
    WebDriverWait(
        driver,
        timeout,
        poll_frequency=POLL,
        ignored_exceptions=(StaleElementReferenceException, NoSuchElementException),
    ).until(lambda d: text in body_text(d), message=f"never saw {text!r}")


def click_button(driver, label: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f"//button[contains(normalize-space(.), '{label}')]").click()


def sign_in(driver, servers: Servers, email: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(servers.console_url + "/login")
    wait_for_text(driver, "Sign in")
    driver.find_element(By.XPATH, "//input[@aria-label='Email']").send_keys(email)
    driver.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys("demo")
    click_button(driver, "Sign in")
    wait_for_text(driver, "Runs")


def screenshot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(height, 900), 4000))
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    driver.set_window_size(1400, 1000)


@contextmanager
def api_as(servers: Servers, email: str) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=servers.api_url, timeout=30, headers={"origin": servers.console_url}
    ) as client:
        assert client.post("/api/auth/login", json={"email": email, "password": "demo"}).status_code == 200
        yield client


def nav(driver, label: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f"//a[.//*[normalize-space(text())='{label}']]").click()


def grant(driver, person: str, dataset: str, level: str) -> None:
    """The grid's cell of `person` under `dataset` set to `level`, as a person picks it."""
    from selenium.webdriver.common.by import By

    headers = [th.text.strip() for th in driver.find_elements(By.XPATH, "//table//tr[1]/th")]
    column = headers.index(dataset)  # the first header is over the rows' names
    row = driver.find_element(By.XPATH, f"//tr[td[1][contains(normalize-space(.), '{person}')]]")
    row.find_elements(By.XPATH, "./td")[column].find_element(By.CSS_SELECTOR, ".q-select").click()
    wait_for_text(driver, level)
    driver.find_element(By.XPATH, f"//div[contains(@class,'q-item')][normalize-space(.)='{level}']").click()


def assistant_token(servers: Servers, email: str) -> str:
    """A personal API token, as the person hands it to the assistant (Assistant access page)."""
    with api_as(servers, email) as api:
        response = api.post("/api/me/tokens", json={"name": "assistant"})
        assert response.status_code == 201, response.text
        return response.json()["token"]
