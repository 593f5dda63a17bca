"""The console's notification pages: a person's own choices on the account page, and a company admin's
webhooks on the settings page with the secret shown once (issue 56 item 5)."""

import pytest
from nicegui import ui
from nicegui.testing.user import User

from backend.settings import get_settings
from tests.support.console import Assistant, sign_in

pytestmark = pytest.mark.sqlite


async def test_a_person_mutes_an_event_and_an_admin_adds_a_webhook_whose_secret_is_shown_once(
    user: User, assistant: Assistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sign_in(user, "alice@acme.example", then="/account")
    await user.should_see(marker="notify-run.finished", retries=50)
    user.find(marker="notify-run.finished").click()
    user.find(marker="notify-save").click()
    await user.should_see("Saved.", retries=50)
    prefs = await assistant.call("alice@acme.example", "GET", "/api/me/notifications")
    assert prefs["muted"] == ["run.finished"] and prefs["email_enabled"] is True
    bob = await assistant.call("bob@acme.example", "GET", "/api/me/notifications")
    assert bob["muted"] == []  # alice's page changed alice's choices only
    # the admin's webhooks (a receiver on this host: the operator allows internal addresses here)
    monkeypatch.setenv("CLEANROOM_WEBHOOK_ALLOW_PRIVATE", "true")
    get_settings.cache_clear()
    try:
        await user.open("/logout")
        user.find(marker="confirm-sign-out").click()
        await user.should_see("Sign in", retries=50)
        await sign_in(user, "admin@acme.example", then="/settings")
        await user.should_see(marker="add-webhook", retries=50)
        user.find(marker="webhook-url").type("http://127.0.0.1:9/hook")
        user.find(marker="add-webhook").click()
        await user.should_see(marker="webhook-secret-value", retries=50)
        shown = user.find(marker="webhook-secret-value").elements.pop()
        assert isinstance(shown, ui.label) and shown.text.startswith("whsec_")
        listed = await assistant.call("admin@acme.example", "GET", "/api/company/webhooks")
        assert [h["url"] for h in listed] == ["http://127.0.0.1:9/hook"]
        assert shown.text not in str(listed)  # never shown again
    finally:
        get_settings.cache_clear()
