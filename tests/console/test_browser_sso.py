"""A person signs in through their company's OpenID Connect provider in real headless Chromium: the real API
and console, and a real provider (`oidc-provider-mock`, started here on loopback) with its own login form."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.console.servers import Servers
from tests.console.test_browser import body_text, browser, click_button, wait_for_text  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=0, require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    running = Servers(tmp_path_factory.mktemp("sso-servers")).start()
    try:
        yield running
    finally:
        running.stop()


def test_a_person_signs_in_with_the_companys_sso_in_the_browser(browser, servers: Servers, provider: str) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    with httpx.Client(base_url=servers.api_url, headers={"origin": servers.console_url}) as admin:
        assert admin.post("/api/auth/login", json={"email": "admin@acme.example", "password": "demo"}).is_success
        configured = admin.put(
            "/api/company/sso",
            json={
                "issuer": provider,
                "client_id": "cleanroom-acme",
                "client_secret": "browser-walk-secret",
                "domains": ["acme.example"],
            },
        )
        assert configured.status_code == 200, configured.text
    browser.delete_all_cookies()
    browser.get(servers.console_url + "/login")
    wait_for_text(browser, "Sign in")
    browser.find_element(By.XPATH, "//input[@aria-label='Email']").send_keys("alice@acme.example")
    wait_for_text(browser, "Sign in with Acme Analytics SSO")
    click_button(browser, "Sign in with Acme Analytics SSO")
    wait_for_text(browser, "Authorize Client")  # the provider's own page
    assert browser.current_url.startswith(provider + "/oauth2/authorize")
    browser.find_element(By.NAME, "sub").send_keys("alice@acme.example")
    click_button(browser, "Authorize")
    wait_for_text(browser, "Alice Novak")  # back on the console, signed in as her
    assert browser.current_url.startswith(servers.console_url + "/runs"), browser.current_url
    assert "Sign in" not in body_text(browser).split("\n")[:3]
