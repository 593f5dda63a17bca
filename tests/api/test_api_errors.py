"""Bad input gets one error shape and the right status."""

from __future__ import annotations

import pytest

from tests.support.http import login, token_for

# the error shapes of the app, not an engine's (the limiter on PostgreSQL: test_login_limits)
pytestmark = pytest.mark.sqlite


async def test_unknown_dataset_names_the_valid_ones(client) -> None:
    await login(client, "admin@acme.example")
    r = await client.get("/api/records/widgets")
    assert r.status_code == 404
    body = r.json()
    assert body["error"] == "unknown_dataset"
    assert "deals" in body["valid_datasets"] and len(body["valid_datasets"]) == 12


async def test_malformed_query_parameters_say_which(client) -> None:
    await login(client, "admin@acme.example")
    r = await client.get("/api/records/deals", params={"page": "abc"})
    assert r.status_code == 422 and r.json()["error"] == "invalid"
    assert "page" in r.text
    r = await client.get("/api/records/deals", params={"sort": "nonsense"})
    assert r.status_code == 422 and "sort" in r.text
    r = await client.get("/api/records/deals", params={"amount": "lots"})
    assert r.status_code == 422 and "amount" in r.text
    r = await client.get("/api/records/deals", params={"colour": "red"})
    assert r.status_code == 422 and "colour" in r.text


async def test_wrong_password_and_unknown_email_fail_the_same_way(client) -> None:
    a = await client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "nope"})
    b = await client.post("/api/auth/login", json={"email": "nobody@acme.example", "password": "demo"})
    assert a.status_code == b.status_code == 401
    assert a.json() == b.json()


async def test_too_many_attempts_answer_429_even_with_the_right_password(client) -> None:
    for _ in range(5):
        r = await client.post("/api/auth/login", json={"email": "bob@acme.example", "password": "wrong"})
        assert r.status_code == 401
    r = await client.post("/api/auth/login", json={"email": "bob@acme.example", "password": "demo"})
    assert r.status_code == 429 and r.json()["error"] == "too_many_requests"
    ok = await client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "demo"})
    assert ok.status_code == 200  # another account is not locked out


async def test_unauthenticated_requests_get_401(client) -> None:
    r = await client.get("/api/records/deals")
    assert r.status_code == 401 and r.json()["error"] == "not_authenticated"
    r = await client.get("/api/records/deals", headers={"Authorization": "Bearer crt_forged"})
    assert r.status_code == 401


async def test_session_cookie_is_http_only_and_strict(client) -> None:
    r = await client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "demo"})
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie


async def test_api_token_is_shown_once_and_stored_hashed(client) -> None:
    from backend.tenancy.tables import ApiToken

    headers = await token_for(client, "alice@acme.example")
    token = headers["Authorization"].split()[1]
    stored = await ApiToken.select().first()
    assert token not in str(stored) and stored["token_hash"] != token
    assert (await client.get("/api/me/", headers=headers)).json()["email"] == "alice@acme.example"
    await login(client, "alice@acme.example")
    listed = (await client.get("/api/me/tokens")).json()
    assert listed and "token" not in listed[0]


async def test_openapi_is_published(client) -> None:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200
    assert "/api/v1/records/{dataset}" in r.json()["paths"]  # the document names the versioned paths


async def test_settings_are_admin_only_and_default_off(client) -> None:
    await login(client, "gina@globex.example")
    globex = (await client.get("/api/company/settings")).json()
    assert globex["code_execution_enabled"] is False and globex["followup_without_reapproval"] is False
    assert globex["assistant_write_enabled"] is True
    await login(client, "alice@acme.example")
    r = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
    assert r.status_code == 403
    await login(client, "admin@acme.example")
    r = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
    assert r.status_code == 200 and r.json()["code_execution_enabled"] is False
    r = await client.patch("/api/company/settings", json={"code_execution_enabled": "yes please"})
    assert r.status_code in (400, 422)
