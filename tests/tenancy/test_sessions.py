"""The session cookie is defended as a browser app's should be: a foreign page cannot make a signed-in
browser change anything (Origin check), a rebound DNS name gets no answer (Host allow-list), the session
secret never appears in a body a script could read, and it is `secure` when people use https.

Each attack is written as the hostile page would send it, next to the same request from our own origin."""

from __future__ import annotations

import pytest

from backend.settings import get_settings
from backend.tenancy.tables import Company
from tests.support.http import console_origin, login, token_for

pytestmark = pytest.mark.sqlite  # the Origin, Host and cookie rules of the app, not an engine's

EVIL = "http://evil.example"
SAME_SITE = "http://127.0.0.1:9999"  # another port on the same host: same site, other origin


async def _code_execution() -> bool:
    row = await Company.select(Company.code_execution_enabled).where(Company.name == "Acme Analytics").first()
    return row["code_execution_enabled"]


async def test_a_foreign_page_cannot_change_settings_with_the_admins_cookie(client) -> None:
    await login(client, "admin@acme.example")
    before = await _code_execution()
    change = {"code_execution_enabled": not before}
    for origin in (EVIL, SAME_SITE, "null"):
        attack = await client.patch("/api/company/settings", json=change, headers={"origin": origin})
        assert attack.status_code == 403, (origin, attack.text)
        assert attack.json()["error"] == "csrf_origin"
    assert await _code_execution() is before
    ours = await client.patch("/api/company/settings", json=change, headers={"origin": console_origin()})
    assert ours.status_code == 200, ours.text  # positive control: the console's origin passes
    assert await _code_execution() is not before


async def test_a_cookie_request_without_origin_is_refused(client) -> None:
    await login(client, "admin@acme.example")
    before = await _code_execution()
    del client.headers["origin"]
    attack = await client.patch("/api/company/settings", json={"code_execution_enabled": not before})
    assert attack.status_code == 403 and attack.json()["error"] == "csrf_origin"
    assert "no Origin" in attack.json()["detail"]
    assert await _code_execution() is before
    assert (await client.get("/api/me/")).status_code == 200  # reading needs no Origin: still signed in


async def test_the_apis_own_origin_passes_too(client) -> None:
    """Swagger UI on the API's origin is a page of ours."""
    await login(client, "admin@acme.example")
    public = get_settings().effective_public_url
    ok = await client.patch(
        "/api/company/settings", json={"followup_without_reapproval": True}, headers={"origin": public}
    )
    assert ok.status_code == 200, ok.text


async def test_a_bearer_request_needs_no_origin(client) -> None:
    token = await token_for(client, "alice@acme.example")
    del client.headers["origin"]
    folder = await client.post("/api/drive/folders", json={"name": "From the assistant"}, headers=token)
    assert folder.status_code == 201, folder.text  # no Origin, not refused by the CSRF rule
    # positive control: the same request signed by the cookie instead is refused
    await login(client, "alice@acme.example")
    by_cookie = await client.post("/api/drive/folders", json={"name": "From a foreign page"})
    assert by_cookie.status_code == 403 and by_cookie.json()["error"] == "csrf_origin"


async def test_sign_in_from_a_foreign_page_is_refused_and_curl_is_not(client) -> None:
    """Login CSRF: a foreign page signing the browser into the attacker's account."""
    attack = await client.post(
        "/api/auth/login", json={"email": "alice@acme.example", "password": "demo"}, headers={"origin": EVIL}
    )
    assert attack.status_code == 403 and attack.json()["error"] == "csrf_origin"
    assert "cleanroom_session" not in attack.headers.get("set-cookie", "")
    del client.headers["origin"]  # curl sends no Origin (and holds no cookie yet)
    ok = await client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "demo"})
    assert ok.status_code == 200, ok.text


async def test_a_rebound_host_name_gets_400(client) -> None:
    """DNS rebinding: evil.example now resolves to 127.0.0.1; the browser sends Host: evil.example."""
    for host in ("evil.example", "evil.example:8400", "127.0.0.1.evil.example"):
        response = await client.get("/api/health", headers={"host": host})
        assert response.status_code == 400, (host, response.text)
    for host in ("127.0.0.1:8400", "localhost:8400", "localhost", "[::1]:8400", "testserver.local"):
        response = await client.get("/api/health", headers={"host": host})
        assert response.status_code == 200, (host, response.text)  # positive control


async def test_the_login_body_carries_no_session_secret(client) -> None:
    response = await client.post("/api/auth/login", json={"email": "maria@acme.example", "password": "demo"})
    assert response.status_code == 200
    assert set(response.json()) == {"user"}
    secret = client.cookies.get("cleanroom_session")
    assert secret and secret not in response.text  # only in the cookie
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert "secure" not in cookie.replace("samesite", "")  # positive control for the https test below


async def test_the_cookie_is_secure_when_the_public_url_is_https(client, monkeypatch) -> None:
    monkeypatch.setattr(get_settings(), "public_url", "https://cleanroom.example")
    response = await client.post("/api/auth/login", json={"email": "maria@acme.example", "password": "demo"})
    assert response.status_code == 200
    attributes = [a.strip().lower() for a in response.headers["set-cookie"].split(";")]
    assert "secure" in attributes and "httponly" in attributes
