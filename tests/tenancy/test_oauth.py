"""OAuth 2.1 for the remote MCP endpoint, at the HTTP level, in-process on SQLite (issue 58): each refusal written as
the hostile party would try it, beside the positive control showing the legitimate party gets through.

The walk a real client makes (the MCP SDK's `OAuthClientProvider`, the consent page in Chromium, then tools) is
tests/console/test_browser_oauth.py; here are the protocol's edges, fast."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from backend import clock
from backend.audit.tables import AuditEntry
from backend.runs.tables import Run
from backend.tenancy import oauth
from backend.tenancy.oauth_tables import OAuthClient, OAuthGrant, OAuthRequest, OAuthToken
from backend.tenancy.tables import Company
from tests.support.http import approve_as, login

pytestmark = pytest.mark.sqlite  # the protocol and who may do what, not an engine's

ALICE = "alice@acme.example"
GLOBEX = "admin@globex.example"
REDIRECT = "http://127.0.0.1:33418/callback"  # a native client's loopback listener


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


async def _register(client: Any, redirect: str = REDIRECT, name: str = "Test assistant") -> dict[str, Any]:
    r = await client.post(
        "/oauth/register",
        json={"redirect_uris": [redirect], "client_name": name, "token_endpoint_auth_method": "none"},
    )
    assert r.status_code == 201, r.text
    return r.json()


async def _authorize(
    client: Any, client_id: str, verifier: str, redirect: str = REDIRECT, **extra: str
) -> Any:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "code_challenge": _challenge(verifier),
        "code_challenge_method": "S256",
        "state": "st-1",
        "scope": "assistant",
        "resource": oauth.resource_url(),
        **extra,
    }
    return await client.get("/oauth/authorize", params=params, follow_redirects=False)


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


async def _consent(client: Any, email: str, location: str, allow: bool = True) -> dict[str, str]:
    """The person, signed in, answers the consent page (the console calls these two routes)."""
    request_id = _query(location)["request_id"]
    await login(client, email)
    shown = await client.get(f"/api/me/connect/{request_id}")
    assert shown.status_code == 200, shown.text
    r = await client.post(f"/api/me/connect/{request_id}", json={"allow": allow})
    assert r.status_code == 200, r.text
    client.cookies.clear()
    return _query(r.json()["redirect_to"])


async def _exchange(client: Any, client_id: str, code: str, verifier: str) -> Any:
    return await client.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )


async def _refresh(client: Any, client_id: str, refresh_token: str) -> Any:
    return await client.post(
        "/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )


async def _connect(client: Any, email: str = ALICE) -> tuple[str, dict[str, Any]]:
    """The whole grant as a client makes it: (client_id, the token answer)."""
    registered = await _register(client)
    verifier = secrets.token_urlsafe(48)
    r = await _authorize(client, registered["client_id"], verifier)
    assert r.status_code == 302, r.text
    answer = await _consent(client, email, r.headers["location"])
    r = await _exchange(client, registered["client_id"], answer["code"], verifier)
    assert r.status_code == 200, r.text
    return registered["client_id"], r.json()


def _bearer(tokens: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens['access_token']}"}


async def _audited(action: str) -> list[dict[str, Any]]:
    return await AuditEntry.select().where(AuditEntry.action == action).output(load_json=True)


async def test_a_client_discovers_registers_and_acts_as_the_persons_assistant(client) -> None:
    # discovery: the MCP endpoint's 401 names its metadata, which names the authorization server
    r = await client.post("/mcp", json={})
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    assert 'resource_metadata="' in challenge
    metadata_url = challenge.split('resource_metadata="')[1].split('"')[0]
    resource = (await client.get(urlsplit(metadata_url).path)).json()
    assert resource["resource"] == oauth.resource_url() and resource["scopes_supported"] == ["assistant"]
    issuer = resource["authorization_servers"][0]
    server = (await client.get("/.well-known/oauth-authorization-server" + urlsplit(issuer).path)).json()
    assert server["issuer"] == issuer and server["code_challenge_methods_supported"] == ["S256"]
    assert server["registration_endpoint"].endswith("/oauth/register")
    # registration gives a public client: no secret exists to leak; a browser-based client on another origin
    # may register (the OAuth endpoints read no cookie), where a sign-in from that origin is refused (control)
    foreign = {"origin": "https://inspector.example"}
    r = await client.post("/api/auth/login", json={"email": ALICE, "password": "demo"}, headers=foreign)
    assert r.status_code == 403 and r.json()["error"] == "csrf_origin"
    r = await client.post("/oauth/register", json={"redirect_uris": [REDIRECT]}, headers=foreign)
    assert r.status_code == 201, r.text
    registered = await _register(client)
    assert "client_secret" not in registered and registered["token_endpoint_auth_method"] == "none"
    verifier = secrets.token_urlsafe(48)
    r = await _authorize(client, registered["client_id"], verifier)
    assert r.status_code == 302 and r.headers["location"].startswith(oauth.CONSENT_PATH, len(_console()))
    request_id = _query(r.headers["location"])["request_id"]
    # the consent page shows who asks and where the code goes; only a signed-in person answers it
    await login(client, ALICE)
    shown = (await client.get(f"/api/me/connect/{request_id}")).json()
    assert shown["client_name"] == "Test assistant" and shown["redirect_uri"] == REDIRECT
    assert shown["scope"] == "assistant"
    answer = _query(
        (await client.post(f"/api/me/connect/{request_id}", json={"allow": True})).json()["redirect_to"]
    )
    client.cookies.clear()
    assert answer["state"] == "st-1"
    tokens = (await _exchange(client, registered["client_id"], answer["code"], verifier)).json()
    assert tokens["expires_in"] == 3600 and tokens["scope"] == "assistant" and tokens["refresh_token"]
    # stored hashed: neither the access nor the refresh token is in the database
    stored = {row["token_hash"] for row in await OAuthToken.select(OAuthToken.token_hash)}
    assert tokens["access_token"] not in stored and tokens["refresh_token"] not in stored
    me = (await client.get("/api/me", headers=_bearer(tokens))).json()
    assert me["email"] == ALICE and me["auth"] == "token" and me["token_scope"] == "assistant"
    granted = await _audited("oauth.granted")
    assert len(granted) == 1 and granted[0]["actor"] == ALICE and granted[0]["data"]["auth"] == "session"
    assert (
        granted[0]["data"]["client_name"] == "Test assistant" and granted[0]["data"]["scope"] == "assistant"
    )


def _console() -> str:
    from backend.settings import get_settings

    return get_settings().effective_console_url.rstrip("/")


async def test_a_redirect_uri_that_was_not_registered_gets_no_code(client) -> None:
    registered = await _register(client)
    verifier = secrets.token_urlsafe(48)
    # what expired a day ago is forgotten at the next authorization (the tables stay as small as their use)
    old = clock.now() - timedelta(days=2)
    await OAuthRequest(request_hash="0" * 64, client_id="x", created_at=old, expires_at=old).save()
    # control: the registered URI reaches the consent page
    assert (await _authorize(client, registered["client_id"], verifier)).status_code == 302
    assert not await OAuthRequest.exists().where(OAuthRequest.request_hash == "0" * 64)
    before = await OAuthRequest.count()
    # hostile: a URI of the attacker's; no redirect at all (the browser goes nowhere), no request to consent to
    r = await _authorize(client, registered["client_id"], verifier, redirect="https://evil.example/steal")
    assert r.status_code == 400 and "location" not in r.headers
    assert r.json()["error"] == "invalid_request"
    assert await OAuthRequest.count() == before
    # registering one that would leak a code over plain http to another host is refused too (https is fine)
    r = await client.post("/oauth/register", json={"redirect_uris": ["http://evil.example/cb"]})
    assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri"
    await _register(client, redirect="https://assistant.example/callback")


async def test_a_code_replayed_is_refused_and_revokes_what_it_gave(client) -> None:
    registered = await _register(client)
    verifier = secrets.token_urlsafe(48)
    r = await _authorize(client, registered["client_id"], verifier)
    code = (await _consent(client, ALICE, r.headers["location"]))["code"]
    first = await _exchange(client, registered["client_id"], code, verifier)
    assert first.status_code == 200  # control: the first exchange
    assert (await client.get("/api/me", headers=_bearer(first.json()))).status_code == 200
    again = await _exchange(client, registered["client_id"], code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    # RFC 6749 4.1.2: whoever replays a code may have stolen it; the tokens the code gave are revoked
    assert (await client.get("/api/me", headers=_bearer(first.json()))).status_code == 401
    assert (await _refresh(client, registered["client_id"], first.json()["refresh_token"])).status_code == 400
    replayed = await _audited("oauth.code_replayed")
    assert len(replayed) == 1 and replayed[0]["subject_type"] == "oauth_grant"


async def test_a_pkce_verifier_that_does_not_match_gets_no_token(client) -> None:
    registered = await _register(client)
    verifier = secrets.token_urlsafe(48)
    r = await _authorize(client, registered["client_id"], verifier)
    code = (await _consent(client, ALICE, r.headers["location"]))["code"]
    # hostile: the code intercepted, without the verifier only the real client holds
    wrong = await _exchange(client, registered["client_id"], code, secrets.token_urlsafe(48))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert await OAuthToken.count().where(OAuthToken.kind == "access") == 0
    # control: the client holding the verifier gets its token
    assert (await _exchange(client, registered["client_id"], code, verifier)).status_code == 200
    # and only S256 is offered: a "plain" challenge never reaches the consent page
    r = await _authorize(client, registered["client_id"], verifier, code_challenge_method="plain")
    assert "error=invalid_request" in r.headers.get("location", "") or r.status_code == 400
    assert oauth.CONSENT_PATH not in r.headers.get("location", "")


async def _proposed_run(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    await Company.update({Company.code_execution_enabled: True}).where(Company.name == "Acme Analytics")
    proposal = {
        "conversation_id": "c-58",
        "title": "Largest open deal",
        "plan": "Find the largest open deal.",
        "code": "print('hello')\n",
        "datasets": ["deals"],
    }
    r = await client.post("/api/runs", json=proposal, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def test_an_oauth_token_proposes_but_never_approves(client) -> None:
    _, tokens = await _connect(client)
    run = await _proposed_run(client, _bearer(tokens))
    assert run["status"] == "awaiting_approval" and run["can_decide"] is False
    hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
    r = await client.post(f"/api/runs/{run['id']}/approve", json=hashes, headers=_bearer(tokens))
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    refused = await _audited("auth.person_required")
    grant_id = (await OAuthGrant.select(OAuthGrant.id).first())["id"]
    assert refused[-1]["subject_type"] == "oauth_grant" and refused[-1]["subject_id"] == str(grant_id)
    assert refused[-1]["actor"] == f"assistant:{ALICE} (connector {grant_id})"
    assert (await Run.select(Run.status).where(Run.id == run["id"]).first())["status"] == "awaiting_approval"
    # nor does it answer a consent page (it cannot connect a second assistant, or itself, for the person)
    registered = await _register(client)
    location = (await _authorize(client, registered["client_id"], "v" * 43)).headers["location"]
    request_id = _query(location)["request_id"]
    r = await client.post(f"/api/me/connect/{request_id}", json={"allow": True}, headers=_bearer(tokens))
    assert r.status_code == 403 and r.json()["error"] == "person_required"
    # control: the person, signed in, approves
    r = await approve_as(client, ALICE, run)
    assert r.status_code == 200 and r.json()["status"] == "queued"


async def test_a_token_of_another_company_sees_nothing_of_this_one(client) -> None:
    _, alice = await _connect(client, ALICE)
    _, globex = await _connect(client, GLOBEX)
    run = await _proposed_run(client, _bearer(alice))
    # control: Alice's assistant reads its run
    assert (await client.get(f"/api/runs/{run['id']}", headers=_bearer(alice))).status_code == 200
    # hostile: Globex's assistant, with a valid token of its own, reads as if it did not exist
    r = await client.get(f"/api/runs/{run['id']}", headers=_bearer(globex))
    assert r.status_code == 404
    listed = (await client.get("/api/runs", headers=_bearer(globex))).json()
    assert run["id"] not in [item["id"] for item in _items(listed)]
    me = (await client.get("/api/me", headers=_bearer(globex))).json()
    assert me["email"] == GLOBEX and me["company"]["name"] != "Acme Analytics"


def _items(listed: Any) -> list[dict[str, Any]]:
    return listed["items"] if isinstance(listed, dict) else listed


async def test_an_expired_access_token_is_refused_and_a_refresh_rotates(client) -> None:
    client_id, tokens = await _connect(client)
    assert (await client.get("/api/me", headers=_bearer(tokens))).status_code == 200  # control
    await OAuthToken.update({OAuthToken.expires_at: clock.now() - timedelta(seconds=1)}).where(
        OAuthToken.kind == "access"
    )
    for path in ("/api/me", "/mcp"):
        r = (
            await client.post(path, json={}, headers=_bearer(tokens))
            if path == "/mcp"
            else await client.get(path, headers=_bearer(tokens))
        )
        assert r.status_code == 401, (path, r.text)
    assert "resource_metadata=" in r.headers["www-authenticate"]  # /mcp tells the client where to go on
    # the refresh token gives a new pair (rotation); the new access token works
    r = await _refresh(client, client_id, tokens["refresh_token"])
    assert r.status_code == 200, r.text
    fresh = r.json()
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert (await client.get("/api/me", headers=_bearer(fresh))).status_code == 200
    # hostile: the old refresh token presented again (a copy someone kept) is refused, and revokes the grant
    r = await _refresh(client, client_id, tokens["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert (await client.get("/api/me", headers=_bearer(fresh))).status_code == 401
    reused = await _audited("oauth.refresh_reused")
    assert len(reused) == 1 and reused[0]["actor"].startswith(f"assistant:{ALICE} (connector ")


async def test_a_revoked_grant_refreshes_no_more(client) -> None:
    client_id, tokens = await _connect(client)
    r = await _refresh(client, client_id, tokens["refresh_token"])
    assert r.status_code == 200  # control: refreshing works while the grant stands
    tokens = r.json()
    await login(client, ALICE)
    listed = (await client.get("/api/me/connections")).json()
    assert [(c["client_name"], c["revoked"]) for c in listed] == [("Test assistant", False)]
    # hostile first: another person cannot revoke (or see) Alice's connection
    client.cookies.clear()
    await login(client, GLOBEX)
    assert (await client.delete(f"/api/me/connections/{listed[0]['id']}")).status_code == 404
    assert (await client.get("/api/me/connections")).json() == []
    # Alice disconnects it from the Assistant access page
    client.cookies.clear()
    await login(client, ALICE)
    assert (await client.delete(f"/api/me/connections/{listed[0]['id']}")).status_code == 204
    client.cookies.clear()
    r = await _refresh(client, client_id, tokens["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert (await client.get("/api/me", headers=_bearer(tokens))).status_code == 401
    revoked = await _audited("oauth.revoked")
    assert len(revoked) == 1 and revoked[0]["actor"] == ALICE and revoked[0]["subject_type"] == "oauth_grant"


async def test_a_role_change_disconnects_the_persons_assistants_as_it_revokes_their_tokens(client) -> None:
    client_id, tokens = await _connect(client)
    me = await client.get("/api/me", headers=_bearer(tokens))
    assert me.status_code == 200  # control: connected
    await login(client, "admin@acme.example")
    r = await client.patch(f"/api/company/people/{me.json()['id']}", json={"role": "auditor"})
    assert r.status_code == 200, r.text
    client.cookies.clear()
    assert (await client.get("/api/me", headers=_bearer(tokens))).status_code == 401
    assert (await _refresh(client, client_id, tokens["refresh_token"])).json()["error"] == "invalid_grant"


def test_oauth_is_offered_on_https_or_this_machine_only() -> None:
    """RFC 8414 wants an https issuer: on a plain-http public URL elsewhere the endpoints say so (404
    `oauth_unavailable`, personal tokens still work) instead of failing; https and loopback are served."""
    from backend.mcp.oauth import _unavailable

    assert "CLEANROOM_PUBLIC_URL" in (_unavailable("http://10.1.2.3:8400/oauth") or "")
    assert _unavailable("https://cleanroom.example/oauth") is None
    assert _unavailable("http://127.0.0.1:8400/oauth") is None


async def test_registrations_are_counted_per_address_and_a_flood_is_turned_away(client) -> None:
    """Registration is open to anyone (an assistant registers before anyone signs in): one address that
    registers again and again is turned away at the hourly limit (429, RFC 7591's error shape), also when it
    rotates through its IPv6 /64; another address still registers (control). The address is not stored."""
    import httpx

    async def register_from(address: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=client.app, client=(address, 40000))
        async with httpx.AsyncClient(transport=transport, base_url=str(client.base_url)) as other:
            return await other.post("/oauth/register", json={"redirect_uris": [REDIRECT]})

    for n in range(oauth.REGISTRATIONS_PER_HOUR):
        assert (await register_from("198.51.100.7")).status_code == 201, n  # control: within the limit
    r = await register_from("198.51.100.7")
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_requests" and "Retry-After" in r.headers
    assert (await register_from("203.0.113.9")).status_code == 201  # another address is not held back
    # one party holds a whole IPv6 /64: rotating the low bits does not reset the count
    for n in range(oauth.REGISTRATIONS_PER_HOUR):
        assert (await register_from(f"2001:db8:1:2::{n + 1:x}")).status_code == 201, n
    assert (await register_from("2001:db8:1:2::ffff")).status_code == 429
    assert (await register_from("2001:db8:1:3::1")).status_code == 201  # the next /64 is another party
    stored = {row["registered_from"] for row in await OAuthClient.select(OAuthClient.registered_from)}
    assert len(stored) == 4 and not any("198.51" in value or "2001" in value for value in stored)


async def test_a_client_nobody_granted_is_forgotten_a_week_after_it_registered(client) -> None:
    """A flood of registrations that never reaches a consent does not stay: the sweep at each authorization
    forgets clients older than a week with no grant and no waiting request; a granted one stays (control)."""
    granted, _ = await _connect(client)
    unused = (await _register(client))["client_id"]
    await OAuthClient.update({OAuthClient.created_at: clock.now() - timedelta(days=8)}).where(
        OAuthClient.client_id.is_in([granted, unused])
    )
    await oauth.sweep(clock.now())
    left = {row["client_id"] for row in await OAuthClient.select(OAuthClient.client_id)}
    assert granted in left and unused not in left
