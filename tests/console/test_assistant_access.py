"""Assistant access: a person creates a personal API token (shown once, with the MCP configurations filled
in), sees their tokens with their last use, and revokes one, after which the API refuses it."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import httpx
import pytest
from nicegui.testing.user import User

from backend.settings import get_settings
from tests.support.console import sign_in

pytestmark = pytest.mark.sqlite

PLACEHOLDER = "<your API token>"


def text_of(user: User, marker: str) -> str:
    return user.find(marker=marker).elements.pop().text


async def bearer_get(api_app, token: str, path: str = "/api/me/") -> httpx.Response:
    """What an assistant holding `token` gets from the real API (no session, no Origin)."""
    transport = httpx.ASGITransport(app=api_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        return await client.get(path, headers={"Authorization": f"Bearer {token}"})


async def mcp_post(api_app, token: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=api_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        return await client.post(
            "/mcp",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )


async def create_token(user: User, name: str) -> tuple[int, str]:
    """Create a token on the page; returns its id and the secret the page shows once."""
    user.find(marker="token-name").type(name)
    user.find(marker="create-token-button").click()
    await user.should_see(marker="new-token", retries=50)
    await user.should_see(f"Token “{name}” created", retries=50)
    secret = text_of(user, "new-token-value")
    assert secret.startswith("crt_") and len(secret) > 30
    for _ in range(100):  # the list reloads after the creation
        for element in list(user.client.elements.values()):
            for marker in element._markers:
                found = re.fullmatch(r"token-prefix-(\d+)", marker)
                if found and element.text == secret[:10] + "…":
                    return int(found.group(1)), secret
        await asyncio.sleep(0.05)
    raise AssertionError(f"the new token {name!r} is not in the list")


def elements_holding(user: User, secret: str) -> list[str]:
    """Every element of the page (as sent to the browser) whose text or props contain `secret`."""
    return [
        f"{element.tag}#{element.id}"
        for element in user.client.elements.values()
        if secret in json.dumps(element._to_dict(), default=str)
    ]


async def test_member_creates_a_token_and_sees_it_once_with_both_configs(
    user: User, api_app, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api_url = get_settings().effective_public_url.rstrip("/")
    console_url = get_settings().effective_console_url.rstrip("/")

    await sign_in(user, "alice@acme.example")  # a member, from the runs page, through the navigation
    await user.should_see(marker="nav-assistant-access", retries=50)
    user.find(marker="nav-assistant-access").click()
    # "Assistant access" and an empty state are on the runs page too (the nav link, no runs yet): wait for
    # what only the access page has, then for its token list to have loaded
    await user.should_see(marker="create-token", retries=50)
    await user.should_see("No tokens yet", retries=50)
    await user.should_see(marker="empty")
    # before any token: the configurations carry a placeholder, and say so
    await user.should_see(marker="configs-placeholder")
    assert PLACEHOLDER in text_of(user, "config-desktop-text")
    assert f"Bearer {PLACEHOLDER}" in text_of(user, "config-remote-text")

    token_id, secret = await create_token(user, "Claude Desktop on my laptop")
    await user.should_see("Copy it now: this is the only time it is shown.")
    await user.should_see(marker="configs-filled")

    # the desktop (stdio) configuration: `cleanroom mcp --api URL`, the token in CLEANROOM_TOKEN
    desktop = json.loads(text_of(user, "config-desktop-text"))["mcpServers"]["cleanroom"]
    assert desktop["command"] == "cleanroom"
    assert desktop["args"] == ["mcp", "--api", api_url, "--console", console_url]
    assert desktop["env"] == {"CLEANROOM_TOKEN": secret}
    # the remote (streamable HTTP) configuration: <API URL>/mcp with the bearer header
    remote = json.loads(text_of(user, "config-remote-text"))["mcpServers"]["cleanroom"]
    assert remote == {
        "type": "http",
        "url": f"{api_url}/mcp",
        "headers": {"Authorization": f"Bearer {secret}"},
    }
    assert f'--header "Authorization: Bearer {secret}"' in text_of(user, "config-claude-code-text")
    assert PLACEHOLDER not in text_of(user, "config-desktop-text")
    assert elements_holding(user, secret)  # the scan below finds the secret while it is shown

    # the list: name, prefix, created, last used, status
    assert text_of(user, f"token-name-{token_id}") == "Claude Desktop on my laptop"
    assert text_of(user, f"token-prefix-{token_id}") == secret[:10] + "…"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text_of(user, f"token-created-{token_id}"))
    assert text_of(user, f"token-last-used-{token_id}") == "Never"
    assert text_of(user, f"token-status-{token_id}") == "active"
    assert user.find(marker=f"revoke-{token_id}").elements

    # the assistant uses it (as alice, with the assistant scope) ...
    response = await bearer_get(api_app, secret)
    assert response.status_code == 200, response.text
    assert response.json()["email"] == "alice@acme.example"
    assert response.json()["auth"] == "token"

    # ... and after a reload the secret is nowhere on the page; the list shows the last use
    await user.open("/access")
    await user.should_see(marker=f"token-{token_id}", retries=50)
    await user.should_not_see(marker="new-token")
    await user.should_see(marker="configs-placeholder")
    assert PLACEHOLDER in text_of(user, "config-desktop-text")
    assert elements_holding(user, secret) == []
    assert text_of(user, f"token-last-used-{token_id}") != "Never"
    assert text_of(user, f"token-prefix-{token_id}") == secret[:10] + "…"  # the prefix identifies it

    # and no log line carries it (though the calls that carried it were logged)
    assert any("/api/v1/me/tokens" in r.getMessage() for r in caplog.records)
    assert not [r.getMessage() for r in caplog.records if secret in r.getMessage()]


async def test_revoking_marks_the_token_revoked_and_the_api_refuses_it(user: User, api_app) -> None:
    await sign_in(user, "bob@acme.example", then="/access")
    await user.should_see(marker="tokens", retries=50)
    laptop_id, laptop = await create_token(user, "Laptop")
    ci_id, ci = await create_token(user, "Build server")
    for secret in (laptop, ci):
        assert (await bearer_get(api_app, secret)).status_code == 200

    # cancelling changes nothing
    user.find(marker=f"revoke-{laptop_id}").click()
    await user.should_see(marker="revoke-dialog", retries=50)
    await user.should_see("This cannot be undone")
    user.find(marker="cancel-revoke").click()
    assert (await bearer_get(api_app, laptop)).status_code == 200

    user.find(marker=f"revoke-{laptop_id}").click()
    await user.should_see(marker="confirm-revoke", retries=50)
    user.find(marker="confirm-revoke").click()
    await user.should_see("Token “Laptop” revoked", retries=50)
    await user.should_see(marker=f"token-{laptop_id}", retries=50)
    for _ in range(50):
        if text_of(user, f"token-status-{laptop_id}") == "revoked":
            break
        await user.should_see(marker="tokens", retries=1)
    assert text_of(user, f"token-status-{laptop_id}") == "revoked"
    await user.should_not_see(marker=f"revoke-{laptop_id}")  # nothing left to do with it

    # the API refuses the revoked token, on the HTTP API and on /mcp ...
    refused = await bearer_get(api_app, laptop)
    assert refused.status_code == 401, refused.text
    assert (await mcp_post(api_app, laptop)).status_code == 401
    assert (await mcp_post(api_app, ci)).status_code != 401  # past the token check
    # ... while the other token (positive control) still reads /api/me
    kept = await bearer_get(api_app, ci)
    assert kept.status_code == 200, kept.text
    assert kept.json()["email"] == "bob@acme.example"
    assert text_of(user, f"token-status-{ci_id}") == "active"

    # after a reload: both listed with their state, neither secret shown
    await user.open("/access")
    await user.should_see(marker=f"token-{ci_id}", retries=50)
    assert text_of(user, f"token-status-{laptop_id}") == "revoked"
    assert text_of(user, f"token-status-{ci_id}") == "active"
    assert elements_holding(user, laptop) == [] and elements_holding(user, ci) == []


async def test_hiding_the_new_token_and_revoking_the_shown_one_put_the_placeholder_back(
    user: User, api_app
) -> None:
    await sign_in(user, "maria@acme.example", then="/access")
    await user.should_see(marker="tokens", retries=50)
    first_id, first = await create_token(user, "Cursor")
    user.find(marker="hide-token").click()
    await user.should_not_see(marker="new-token", retries=50)
    assert elements_holding(user, first) == []
    await user.should_see(marker="configs-placeholder")

    second_id, second = await create_token(user, "Claude Code")
    user.find(marker=f"revoke-{second_id}").click()
    user.find(marker="confirm-revoke").click()
    await user.should_not_see(marker="new-token", retries=50)  # its configurations would no longer work
    assert elements_holding(user, second) == []
    assert (await bearer_get(api_app, second)).status_code == 401
    assert (await bearer_get(api_app, first)).status_code == 200


async def test_a_token_needs_a_name(user: User, assistant) -> None:
    await sign_in(user, "alice@acme.example", then="/access")
    await user.should_see(marker="tokens", retries=50)
    user.find(marker="create-token-button").click()
    await user.should_see("Give the token a name", retries=50)
    await user.should_not_see(marker="new-token")
    assert await assistant.call("alice@acme.example", "GET", "/api/me/tokens") == []


async def test_copy_buttons_write_to_the_clipboard(user: User) -> None:
    copied: list[str] = []

    def clipboard(match: re.Match) -> bool:
        copied.append(json.loads(match.group(1)))
        return True

    user.javascript_rules[re.compile(r".*navigator\.clipboard\.writeText\((\".*?\")\)", re.DOTALL)] = (
        clipboard
    )
    await sign_in(user, "alice@acme.example", then="/access")
    await user.should_see(marker="tokens", retries=50)
    _, secret = await create_token(user, "Desktop")
    user.find(marker="new-token-copy").click()
    await user.should_see("Token copied to the clipboard.", retries=50)
    user.find(marker="config-remote-copy").click()
    await user.should_see("Remote configuration copied to the clipboard.", retries=50)
    assert copied[0] == secret
    assert json.loads(copied[1])["mcpServers"]["cleanroom"]["headers"]["Authorization"] == f"Bearer {secret}"


async def test_every_signed_in_person_has_the_page(user: User) -> None:
    await user.open("/access")  # signed out: to the sign-in page, and back after it
    await user.should_see(marker="sign-in", retries=50)
    await sign_in(user, "admin@acme.example", then="/access")
    await user.should_see("Assistant access", retries=50)
    await user.should_see(marker="nav-assistant-access")
    await user.should_see(marker="create-token")


VERIFIER = "v" * 64
REDIRECT = "https://assistant.example/callback"


def _query(url: str) -> dict[str, str]:
    from urllib.parse import parse_qs, urlsplit

    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


async def _authorization_request(client: httpx.AsyncClient) -> tuple[str, str]:
    """An assistant registers and sends the person to the consent page: (its client id, the request's id)."""
    import base64
    import hashlib

    challenge = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")
    body = {"redirect_uris": [REDIRECT], "client_name": "Test assistant"}
    client_id = (await client.post("/oauth/register", json=body)).json()["client_id"]
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    location = (await client.get("/oauth/authorize", params=query)).headers["location"]
    return client_id, _query(location)["request_id"]


async def _connected_assistant(api_app, email: str) -> str:
    """An assistant connected by OAuth as a client does it (register, authorize, the person's consent through the
    API, the code for a token): its access token."""
    from tests.support.http import console_origin

    transport = httpx.ASGITransport(app=api_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        client_id, request_id = await _authorization_request(client)
        client.headers["origin"] = console_origin()
        await client.post("/api/auth/login", json={"email": email, "password": "demo"})
        answer = (await client.post(f"/api/me/connect/{request_id}", json={"allow": True})).json()
        client.cookies.clear()
        form = {
            "grant_type": "authorization_code",
            "code": _query(answer["redirect_to"])["code"],
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": VERIFIER,
        }
        return (await client.post("/oauth/token", data=form)).json()["access_token"]


async def test_a_connected_assistant_is_listed_beside_both_ways_to_connect_and_disconnected(
    user: User, api_app
) -> None:
    access_token = await _connected_assistant(api_app, "alice@acme.example")
    assert (await mcp_post(api_app, access_token)).status_code != 401  # control: past the token check
    await sign_in(user, "alice@acme.example", then="/access")
    await user.should_see(marker="config-oauth", retries=50)
    api_url = get_settings().effective_public_url.rstrip("/")
    assert text_of(user, "config-oauth-text") == f"{api_url}/mcp"  # the OAuth connector URL
    await user.should_see(marker="config-remote")  # and the personal token's configuration
    await user.should_see("Test assistant", retries=50)
    grant_marker = next(
        m for e in user.client.elements.values() for m in e._markers if re.fullmatch(r"disconnect-\d+", m)
    )
    user.find(marker=grant_marker).click()
    await user.should_see(marker="disconnect-dialog", retries=20)
    user.find(marker="confirm-disconnect").click()
    await user.should_see("revoked", retries=50)
    # the assistant is refused from its next request, on /mcp and on the API
    assert (await mcp_post(api_app, access_token)).status_code == 401
    assert (await bearer_get(api_app, access_token)).status_code == 401


async def test_the_consent_page_signs_the_person_in_first_then_shows_who_asks(user: User, api_app) -> None:
    """The usual path: the assistant's link opens the console signed out; sign-in leads back to the consent page,
    which names the assistant and where it returns."""
    transport = httpx.ASGITransport(app=api_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        _, request_id = await _authorization_request(client)
    await user.open(f"/connect?request_id={request_id}")
    await user.should_see(marker="email", retries=50)  # signed out: the sign-in page first
    user.find(marker="email").type("alice@acme.example")
    user.find(marker="password").type("demo")
    user.find(marker="sign-in").click()
    await user.should_see(marker="consent-client", retries=50)
    assert "“Test assistant” asks" in text_of(user, "consent-client")
    assert text_of(user, "consent-redirect") == REDIRECT
    await user.should_see(marker="consent-allow")
    # an id nobody issued shows no request to allow
    await user.open("/connect?request_id=nope")
    await user.should_see("This connection request is not open", retries=50)
    await user.should_not_see(marker="consent-allow")
