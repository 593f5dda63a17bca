"""Issue 53's goal in real Chromium, from an EMPTY database, following docs/onboarding.md step by step: the
sign-in page says "No company yet"; the operator's command; the admin sets a password by the printed link,
turns code execution on, invites a member (the link shown once), grants them `deals` in the grid; the member
sets a password, creates their assistant's token; the assistant proposes over the API; the member approves.
And the document's single sign-on: an admin names the company's provider on its page (a real OpenID Connect
provider, `oidc-provider-mock`, started here on loopback) and signs in through it at the provider's own form.

The servers have no guest image (an empty image cache), so the approved run ends at the VM stage at once:
the claim here is the door (tests/console/test_browser.py runs an approved run in a real VM)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.support.browser import body_text, chromium, click_button, grant, nav, wait_for_text
from tests.support.servers import REPO, Servers

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ADMIN, MEMBER = "peter@initech.test", "milton@initech.test"
ADMIN_PW, MEMBER_PW = "lantern quiet orbit 42", "copper meadow violin 7"
LINK = re.compile(r"https?://\S+/set-password\?token=crl_[A-Za-z0-9_-]+")


class EmptyServers(Servers):
    """The API and console on a database nobody seeded, and no guest image."""

    def seed(self) -> None:
        (self.data_dir / "no-images").mkdir(exist_ok=True)

    def env(self) -> dict[str, str]:
        return {**super().env(), "CLEANROOM_IMAGE_CACHE_DIR": str(self.data_dir / "no-images")}


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium as tests/console/test_browser.py starts it, resolving no name but this machine's: the
    provider's pages link a stylesheet on a CDN, which must stay a failed load, never a request."""
    yield from chromium("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1")


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=0, require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    running = EmptyServers(tmp_path_factory.mktemp("onboarding-servers")).start()
    try:
        yield running
    finally:
        running.stop()


def field(driver, label: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.XPATH, f"//input[@aria-label='{label}']")


def set_password_by_link(driver, link: str, password: str) -> None:
    driver.delete_all_cookies()
    driver.get(link)
    wait_for_text(driver, "At least 12 characters")  # the link was read: its page asks for the password
    field(driver, "New password").send_keys(password)
    field(driver, "Repeat it").send_keys(password)
    click_button(driver, "Set password")
    wait_for_text(driver, "Your password is set")


def sign_in(driver, servers: Servers, email: str, password: str) -> None:
    driver.get(servers.console_url + "/login")
    wait_for_text(driver, "Sign in")
    field(driver, "Email").send_keys(email)
    field(driver, "Password").send_keys(password)
    click_button(driver, "Sign in")
    wait_for_text(driver, "Runs")


def shown_link(driver) -> str:
    found = LINK.search(body_text(driver))
    assert found, body_text(driver)
    return found.group(0)


def create_company(servers: Servers, name: str, admin: str) -> str:
    """The operator's command (docs/onboarding.md, step 1): the admin's link, as it prints it."""
    printed = subprocess.run(
        [sys.executable, "-m", "backend", "companies", "create", name, "--admin", admin],
        env=servers.env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    found = LINK.search(printed)
    assert found, printed
    return found.group(0)


def test_from_an_empty_database_to_a_members_approved_run(browser, servers: Servers) -> None:
    from selenium.webdriver.common.by import By

    driver = browser
    # 1. nothing exists: the sign-in page says so, and only that
    driver.delete_all_cookies()
    driver.get(servers.console_url + "/login")
    wait_for_text(driver, "No company yet")
    assert "Password" not in body_text(driver)
    admin_link = create_company(servers, "Initech", ADMIN)
    # 2. the admin sets a password by the link, and signs in
    set_password_by_link(driver, admin_link, ADMIN_PW)
    sign_in(driver, servers, ADMIN, ADMIN_PW)
    # 3. code execution on
    nav(driver, "Settings")
    wait_for_text(driver, "Let the assistant run code")
    driver.find_element(By.XPATH, "//*[contains(text(), 'Let the assistant run code')]").click()
    wait_for_text(driver, "Saved")
    # 4. invites the member; no mail configured: the link is shown once
    nav(driver, "People")
    wait_for_text(driver, "Invite a person")
    field(driver, "E-mail").send_keys(MEMBER)
    field(driver, "Name (optional)").send_keys("Milton")
    click_button(driver, "Invite")
    wait_for_text(driver, "shown only now")
    member_link = shown_link(driver)
    # 5. grants deals (read) in the grid
    nav(driver, "Teams and permissions")
    wait_for_text(driver, "Dataset permissions")
    wait_for_text(driver, MEMBER)
    grant(driver, MEMBER, "deals", "read")
    click_button(driver, "Save permissions")
    wait_for_text(driver, "Permissions saved")
    # 6. the member sets a password, signs in, and makes their assistant's token
    set_password_by_link(driver, member_link, MEMBER_PW)
    sign_in(driver, servers, MEMBER, MEMBER_PW)
    nav(driver, "Assistant access")
    wait_for_text(driver, "Create token")
    field(driver, "Token name").send_keys("my assistant")
    click_button(driver, "Create token")
    wait_for_text(driver, "crt_")
    token = re.search(r"crt_[A-Za-z0-9_-]+", body_text(driver)).group(0)  # type: ignore[union-attr]
    # 7. the assistant proposes over the API (a token may propose, never approve)
    proposal = {
        "conversation_id": "c1",
        "title": "Deals by stage",
        "plan": "Count the deals by stage.",
        "code": "print(42)",
        "datasets": ["deals"],
        "files": [],
    }
    with httpx.Client(base_url=servers.api_url, headers={"Authorization": f"Bearer {token}"}) as assistant:
        proposed = assistant.post("/api/runs", json=proposal)
        assert proposed.status_code == 201, proposed.text
        run = proposed.json()
        hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
        refused = assistant.post(f"/api/runs/{run['id']}/approve", json=hashes)
        assert refused.status_code == 403 and refused.json()["error"] == "person_required"
        # ... and the member approves in the browser
        nav(driver, "Runs")
        wait_for_text(driver, "Deals by stage")
        driver.find_element(By.LINK_TEXT, "Deals by stage").click()
        wait_for_text(driver, "Approving binds to this exact code")
        click_button(driver, "Approve and run")
        wait_for_text(driver, "Approved by")
        after = assistant.get(f"/api/runs/{run['id']}").json()
    assert after["status"] not in ("awaiting_approval", "rejected"), after["status"]
    assert after["approval"]["by"] == MEMBER


def test_an_admin_sets_up_single_sign_on_and_signs_in_through_it(
    browser,
    servers: Servers,
    provider: str,
) -> None:
    driver = browser
    admin = "gavin@hooli.test"
    set_password_by_link(driver, create_company(servers, "Hooli", admin), ADMIN_PW)
    sign_in(driver, servers, admin, ADMIN_PW)
    nav(driver, "Single sign-on")
    wait_for_text(driver, "Just-in-time membership")
    field(driver, "Issuer (https://…)").send_keys(provider)
    field(driver, "Client ID").send_keys("cleanroom-hooli")
    field(driver, "Client secret").send_keys("browser-walk-secret-5d2")
    field(driver, "E-mail domains it serves (comma separated)").send_keys("hooli.test")
    click_button(driver, "Save")
    wait_for_text(driver, "A client secret is stored (it is never shown).")
    assert "browser-walk-secret-5d2" not in driver.page_source
    # signed out, the sign-in page offers the company's provider for its domain
    driver.delete_all_cookies()
    driver.get(servers.console_url + "/login")
    wait_for_text(driver, "Sign in")
    field(driver, "Email").send_keys(admin)
    wait_for_text(driver, "Sign in with Hooli SSO")
    click_button(driver, "Sign in with Hooli SSO")
    wait_for_text(driver, "Authorize Client")  # the provider's own page
    assert driver.current_url.startswith(provider + "/oauth2/authorize")
    from selenium.webdriver.common.by import By

    driver.find_element(By.NAME, "sub").send_keys(admin)
    click_button(driver, "Authorize")
    wait_for_text(driver, "Runs")  # back on the console, signed in as the admin
    assert driver.current_url.startswith(servers.console_url + "/runs"), driver.current_url
    wait_for_text(driver, "Hooli")
