"""The console's single sign-on pages through NiceGUI's simulated user against the real API: the admin's
settings (the secret never shown back), a member kept out, the sign-in page offering the company's SSO only for
its domains, and a return this browser did not start refused. The walk through a real provider in a real
browser is tests/console/test_browser_sso.py."""

from __future__ import annotations

import pytest
from nicegui.testing.user import User

from backend.tenancy.sso_tables import CompanySso
from tests.support.console import Assistant, sign_in

pytestmark = pytest.mark.sqlite
SECRET = "console-typed-secret-91f0"


async def test_an_admin_configures_sso_and_the_secret_is_never_shown_back(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, "admin@acme.example", then="/sso-settings")
    await user.should_see(marker="sso-form", retries=50)
    user.find(marker="sso-issuer").type("https://login.acme.example")
    user.find(marker="sso-client-id").type("cleanroom")
    user.find(marker="sso-client-secret").type(SECRET)
    user.find(marker="sso-domains").type("acme.example")
    user.find(marker="sso-save").click()
    await user.should_see(marker="sso-secret-set", retries=50)
    await user.should_see("/sso/callback")
    row = await CompanySso.select().first()
    assert row["client_secret"] == SECRET and row["issuer"] == "https://login.acme.example"
    await user.open("/sso-settings")  # read back: the secret is nowhere on the page
    await user.should_see(marker="sso-secret-set", retries=50)
    assert all(
        SECRET not in (e.props.get("value") or "") for e in user.find(marker="sso-client-secret").elements
    )
    await user.should_not_see(SECRET)
    shown = await assistant.call("admin@acme.example", "GET", "/api/company/sso")
    assert SECRET not in str(shown) and shown["client_secret_set"] is True


async def test_a_member_has_no_sso_settings(user: User) -> None:
    await sign_in(user, "alice@acme.example")
    await user.should_not_see(marker="nav-single-sign-on")
    await user.open("/sso-settings")
    await user.should_see(marker="page-title", retries=50)
    await user.should_not_see(marker="sso-form")  # sent to the runs (the admin's own walk is the test above)


async def test_the_sign_in_page_offers_sso_only_for_a_served_domain(user: User, assistant: Assistant) -> None:
    await assistant.call(
        "admin@acme.example",
        "PUT",
        "/api/company/sso",
        json={
            "issuer": "https://login.acme.example",
            "client_id": "cleanroom",
            "client_secret": SECRET,
            "domains": ["acme.example"],
        },
    )
    await user.open("/login")
    user.find(marker="email").type("someone@elsewhere.example")
    await user.should_not_see("Sign in with Acme Analytics SSO")
    user.find(marker="email").clear().type("alice@acme.example")
    await user.should_see("Sign in with Acme Analytics SSO", retries=50)


async def test_a_return_this_browser_did_not_start_is_refused(user: User) -> None:
    await user.open("/sso/callback?code=stolen-code&state=someone-elses-state")
    await user.should_see(marker="sso-error")
    await user.should_see("not started in this browser")
    await user.open("/runs")  # not signed in
    await user.should_see("Sign in")


async def test_the_typed_client_answers_the_sso_schemas(api_app) -> None:
    import httpx

    from backend.tenancy.sso_schemas import SsoOffer, SsoSettings
    from console.api import Api, ApiConfig, ApiError

    config = ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app))
    admin, alice = Api(config), Api(config)
    await admin.login("admin@acme.example", "demo")
    await alice.login("alice@acme.example", "demo")
    assert await admin.sso_settings() is None
    saved = await admin.configure_sso(
        issuer="https://login.acme.example", client_id="c", client_secret=SECRET, domains=["acme.example"]
    )
    assert (
        isinstance(saved, SsoSettings) and saved.client_secret_set and SECRET not in saved.model_dump_json()
    )
    assert (await admin.sso_settings()) == saved
    offer = await alice.sso_offer("alice@acme.example")
    assert isinstance(offer, SsoOffer) and offer.available
    with pytest.raises(ApiError) as refused:  # a member: no settings, read or written
        await alice.configure_sso(jit_membership=True)
    assert refused.value.status == 403
    await admin.remove_sso()
    assert await admin.sso_settings() is None and not (await alice.sso_offer("alice@acme.example")).available
