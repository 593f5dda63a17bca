"""A company's OpenID Connect sign-in against a real provider: `oidc-provider-mock` (a PyPI package: Authlib's
authorization server with its own keys, login form and token endpoint), started here on a loopback port; no
provider is imitated in this repository. Each attack (a replayed or forged state, a replayed code, an ID
token for another client or another nonce, an address nobody invited, an address of another company's
domain, a member or the assistant at the settings) next to the legitimate sign-in that passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from backend import clock
from backend.audit.tables import AuditEntry
from backend.hashing import sha256_text
from backend.tenancy import sso
from backend.tenancy.sso_tables import CompanySso, SsoSignIn
from backend.tenancy.tables import User
from tests.support.http import login, token_for

pytestmark = pytest.mark.sqlite  # the claims are the flow's, not an engine's

ACME_SECRET = "acme-client-secret-7c1d9e"
GLOBEX_SECRET = "globex-client-secret-42aa"


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=0, require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


def data_of(entry: dict) -> dict:
    data = entry["data"]
    return json.loads(data) if isinstance(data, str) else data


async def configure(client, provider: str, admin: str = "admin@acme.example", **extra: Any) -> dict:
    body = {
        "issuer": provider,
        "client_id": "cleanroom-acme" if "acme" in admin else "cleanroom-globex",
        "client_secret": ACME_SECRET if "acme" in admin else GLOBEX_SECRET,
        "domains": ["acme.example"] if "acme" in admin else ["globex.example"],
        **extra,
    }
    await login(client, admin)
    response = await client.put("/api/company/sso", json=body)
    assert response.status_code == 200, response.text
    client.cookies.clear()
    return response.json()


async def at_provider(start: dict, signs_in_as: str) -> tuple[str, str]:
    """The person at the provider's own login form, as a browser would post it: (code, state) it redirects
    back with."""
    async with httpx.AsyncClient() as browser:
        answer = await browser.post(start["authorization_url"], data={"sub": signs_in_as})
    assert answer.status_code == 302, answer.text
    back = urlsplit(answer.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == sso.redirect_uri()
    query = parse_qs(back.query)
    return query["code"][0], query["state"][0]


async def start(client, email: str) -> dict:
    response = await client.post("/api/auth/sso/start", json={"email": email})
    assert response.status_code == 200, response.text
    return response.json()


async def sign_in(client, email: str, *, as_: str | None = None) -> httpx.Response:
    begun = await start(client, email)
    code, state = await at_provider(begun, as_ or email)
    return await client.post("/api/auth/sso/return", json={"code": code, "state": state})


async def test_a_person_of_the_company_signs_in_through_its_provider(client, provider: str) -> None:
    shown = await configure(client, provider)
    assert shown["client_secret_set"] is True and ACME_SECRET not in str(shown)
    offer = (await client.get("/api/auth/sso", params={"email": "alice@acme.example"})).json()
    assert offer == {"available": True, "label": "Acme Analytics SSO"}
    nobody = (await client.get("/api/auth/sso", params={"email": "someone@elsewhere.example"})).json()
    assert nobody["available"] is False
    begun = await start(client, "alice@acme.example")
    query = parse_qs(urlsplit(begun["authorization_url"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]  # PKCE
    assert query["nonce"][0] and query["state"] == [begun["state"]]
    assert query["redirect_uri"] == [sso.redirect_uri()] and query["client_id"] == ["cleanroom-acme"]
    code, state = await at_provider(begun, "alice@acme.example")
    signed_in = await client.post("/api/auth/sso/return", json={"code": code, "state": state})
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["user"]["email"] == "alice@acme.example"
    me = await client.get("/api/me/")
    assert me.status_code == 200 and me.json()["company"]["name"] == "Acme Analytics"
    assert me.json()["auth"] == "session"
    entry = (
        await AuditEntry.select()
        .where(AuditEntry.action == "auth.login")
        .order_by(AuditEntry.id, ascending=False)
        .first()
    )
    assert entry["actor"] == "alice@acme.example" and data_of(entry)["method"] == "sso"


async def test_a_state_is_used_once_and_a_forged_one_is_refused(client, provider: str) -> None:
    await configure(client, provider)
    begun = await start(client, "alice@acme.example")
    code, state = await at_provider(begun, "alice@acme.example")
    forged = await client.post("/api/auth/sso/return", json={"code": code, "state": state + "x"})
    assert forged.status_code == 401 and forged.json()["error"] == "sso_refused"
    first = await client.post("/api/auth/sso/return", json={"code": code, "state": state})
    assert first.status_code == 200, first.text  # control: the genuine return, once
    client.cookies.clear()
    replayed = await client.post("/api/auth/sso/return", json={"code": code, "state": state})
    assert replayed.status_code == 401 and replayed.json()["error"] == "sso_refused"
    assert (await client.get("/api/me/")).status_code == 401


async def test_a_used_code_under_a_fresh_state_is_refused_by_the_provider(client, provider: str) -> None:
    await configure(client, provider)
    code, _ = await at_provider(await start(client, "alice@acme.example"), "alice@acme.example")
    assert (await client.post("/api/auth/sso/return", json={"code": code, "state": _})).status_code == 200
    client.cookies.clear()
    fresh = await start(client, "alice@acme.example")
    replay = await client.post("/api/auth/sso/return", json={"code": code, "state": fresh["state"]})
    assert replay.status_code == 401 and replay.json()["error"] == "sso_refused"
    assert "refused the sign-in" in replay.json()["detail"]
    assert (await client.get("/api/me/")).status_code == 401


async def _id_token(provider: str, client_id: str, nonce: str, email: str) -> str:
    """An ID token the real provider signs for `client_id` (the code flow run as that client)."""
    redirect = "http://127.0.0.1:1/other-app/callback"
    async with httpx.AsyncClient() as other:
        authorize = await other.post(
            f"{provider}/oauth2/authorize",
            params={
                "client_id": client_id,
                "response_type": "code",
                "scope": "openid email",
                "redirect_uri": redirect,
                "state": "s",
                "nonce": nonce,
            },
            data={"sub": email},
        )
        code = parse_qs(urlsplit(authorize.headers["location"]).query)["code"][0]
        tokens = await other.post(
            f"{provider}/oauth2/token",
            data={"grant_type": "authorization_code", "code": code, "redirect_uri": redirect},
            auth=(client_id, "any"),
        )
    return tokens.json()["id_token"]


async def test_an_id_token_for_another_client_or_nonce_is_refused(client, provider: str) -> None:
    await configure(client, provider)
    row = await CompanySso.select().first()
    metadata = await sso._metadata(row["issuer"])
    ours = await _id_token(provider, "cleanroom-acme", "nonce-1", "alice@acme.example")
    claims = await sso.validate_id_token(row, metadata, ours, "nonce-1")  # control: ours, our nonce
    assert claims["email"] == "alice@acme.example" and claims["aud"] in ("cleanroom-acme", ["cleanroom-acme"])
    theirs = await _id_token(provider, "another-app", "nonce-1", "alice@acme.example")
    with pytest.raises(sso.NotAuthenticated, match="ID token was refused"):
        await sso.validate_id_token(row, metadata, theirs, "nonce-1")
    with pytest.raises(sso.NotAuthenticated, match="ID token was refused"):
        await sso.validate_id_token(row, metadata, ours, "another-nonce")
    head, body, signature = ours.split(".")
    tampered = ".".join((head, body, signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")))
    with pytest.raises(sso.NotAuthenticated, match="ID token was refused"):
        await sso.validate_id_token(row, metadata, tampered, "nonce-1")


async def test_an_address_nobody_invited_is_refused_unless_just_in_time_is_on(client, provider: str) -> None:
    await configure(client, provider)
    refused = await sign_in(client, "newcomer@acme.example")
    assert refused.status_code == 401 and "was not invited" in refused.json()["detail"]
    assert await User.count().where(User.email == "newcomer@acme.example") == 0
    await configure(client, provider, jit_membership=True)  # the admin turns it on (the secret kept)
    admitted = await sign_in(client, "newcomer@acme.example")
    assert admitted.status_code == 200, admitted.text
    person = await User.select().where(User.email == "newcomer@acme.example").first()
    assert person["role"] == "member" and person["active"]
    assert admitted.json()["user"]["role"] == "member"
    created = await AuditEntry.select().where(AuditEntry.action == "user.created").first()
    assert data_of(created)["email"] == "newcomer@acme.example"


async def test_another_companys_domain_cannot_enter_this_company(client, provider: str) -> None:
    await configure(client, provider, jit_membership=True)
    await configure(client, provider, admin="admin@globex.example")
    # Acme's sign-in, and at the provider the person is Globex's: refused, even with just-in-time on
    crossed = await sign_in(client, "alice@acme.example", as_="gina@globex.example")
    assert crossed.status_code == 401 and "not one this company" in crossed.json()["detail"]
    assert (await client.get("/api/me/")).status_code == 401
    # control: the same person through her own company's sign-in
    own = await sign_in(client, "gina@globex.example")
    assert own.status_code == 200 and own.json()["user"]["company"]["name"] == "Globex"
    client.cookies.clear()
    # and Acme cannot claim Globex's domain to reach its people
    await login(client, "admin@acme.example")
    grab = await client.put("/api/company/sso", json={"domains": ["acme.example", "globex.example"]})
    assert grab.status_code == 409, grab.text


async def test_the_secret_is_write_only_and_only_an_admin_in_a_session_configures(
    client, provider: str
) -> None:
    shown = await configure(client, provider)
    assert shown["client_secret_set"] is True
    await login(client, "admin@acme.example")
    read = await client.get("/api/company/sso")
    assert (
        read.status_code == 200
        and ACME_SECRET not in read.text
        and read.json()["client_id"] == "cleanroom-acme"
    )
    trail = await AuditEntry.select(AuditEntry.data).where(AuditEntry.action == "sso.configured")
    assert trail and all(ACME_SECRET not in str(e["data"]) for e in trail)
    assert data_of(trail[0])["client_secret"] == "changed"
    client.cookies.clear()
    for member in ("alice@acme.example",):
        await login(client, member)
        assert (await client.get("/api/company/sso")).status_code == 403
        change = await client.put("/api/company/sso", json={"issuer": "https://evil.example"})
        assert change.status_code == 403
        client.cookies.clear()
    assistant = await token_for(client, "admin@acme.example")
    by_token = await client.put("/api/company/sso", json={"jit_membership": True}, headers=assistant)
    assert by_token.status_code == 403 and by_token.json()["error"] == "person_required"
    await login(client, "admin@globex.example")
    assert (await client.get("/api/company/sso")).json() is None  # another company's admin sees none of it
    client.cookies.clear()
    row = await CompanySso.select().first()
    assert row["jit_membership"] is False and row["issuer"] == provider
    await login(client, "admin@acme.example")
    # the stored secret is not carried to another provider (it would be sent to its token endpoint)
    moved = await client.put("/api/company/sso", json={"issuer": "https://idp.example.com"})
    assert moved.status_code == 422 and "secret typed again" in moved.text
    assert (await CompanySso.select(CompanySso.issuer).first())["issuer"] == provider
    kept = await client.put("/api/company/sso", json={"jit_membership": True})  # control: same provider
    assert kept.status_code == 200 and kept.json()["jit_membership"] is True
    plain_http = await client.put("/api/company/sso", json={"issuer": "http://idp.example.com"})
    assert plain_http.status_code == 422 and "https" in plain_http.text


async def test_a_deactivated_person_or_a_late_return_is_refused(client, provider: str) -> None:
    await configure(client, provider)
    alice = (await User.select(User.id).where(User.email == "alice@acme.example").first())["id"]
    await login(client, "admin@acme.example")
    assert (await client.post(f"/api/company/people/{alice}/deactivate")).status_code == 200
    client.cookies.clear()
    refused = await sign_in(client, "alice@acme.example")
    assert refused.status_code == 401 and "is deactivated" in refused.json()["detail"]
    await login(client, "admin@acme.example")
    assert (await client.post(f"/api/company/people/{alice}/reactivate")).status_code == 200
    client.cookies.clear()
    assert (await sign_in(client, "alice@acme.example")).status_code == 200  # control: active again
    client.cookies.clear()
    # a sign-in that took longer than its ten minutes (the state row says when it ends)
    begun = await start(client, "alice@acme.example")
    code, state = await at_provider(begun, "alice@acme.example")
    await SsoSignIn.update({SsoSignIn.expires_at: clock.now() - timedelta(seconds=1)}).where(
        SsoSignIn.state_hash == sha256_text(state)
    )
    late = await client.post("/api/auth/sso/return", json={"code": code, "state": state})
    assert late.status_code == 401 and "took too long" in late.json()["detail"]
