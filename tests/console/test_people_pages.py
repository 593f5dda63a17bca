"""The console's people, teams-and-permissions and account pages through NiceGUI's simulated user against the
real API (issue 53): what an admin does there lands in the API, a member is kept out, a link's page sets a
password once, and the sign-in page of an empty database says only that there is no company yet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from nicegui.testing.user import User
from nicegui.testing.user_simulation import user_simulation

from backend.tenancy.tables import User as Person
from console import session
from console.api import ApiConfig
from tests.support.console import CONSOLE_APP, Assistant, sign_in
from tests.support.databases import _shared_app

pytestmark = pytest.mark.sqlite
STRONG = "harbor velvet pencil 58"


def link_token(text: str) -> str:
    return parse_qs(urlparse(text.strip()).query)["token"][0]


def shown_link(user: User) -> str:
    return next(iter(user.find(marker="issued-link-url").elements)).text


async def test_an_admin_invites_and_the_person_sets_a_password_by_the_link_once(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, "admin@acme.example", then="/people")
    await user.should_see(marker="invite-form", retries=50)
    user.find(marker="invite-email").type("newhire@acme.example")
    user.find(marker="invite-name").type("New Hire")
    user.find(marker="invite").click()
    await user.should_see(marker="issued-link-url", retries=50)
    link = shown_link(user)
    await user.should_see(marker="status-newhire@acme.example", retries=50)
    people = {p["email"]: p for p in await assistant.call("admin@acme.example", "GET", "/api/company/people")}
    assert people["newhire@acme.example"]["status"] == "invited"
    await user.open("/logout")
    user.find(marker="confirm-sign-out").click()
    await user.should_see(marker="email", retries=50)
    # the link's page: a weak password refused (the link still works), then a good one, then the link is spent
    await user.open(f"/set-password?token={link_token(link)}")
    await user.should_see(marker="link-info", retries=50)
    await user.should_see("newhire@acme.example")
    user.find(marker="new-password").type("password1234")
    user.find(marker="repeat-password").type("password1234")
    user.find(marker="set-password").click()
    await user.should_see(marker="set-password-error", retries=50)
    assert await Person.select(Person.password_hash).where(
        Person.email == "newhire@acme.example"
    ).first() == {"password_hash": ""}
    user.find(marker="new-password").clear().type(STRONG)
    user.find(marker="repeat-password").clear().type(STRONG)
    user.find(marker="set-password").click()
    await user.should_see(marker="password-set", retries=50)
    await user.open(f"/set-password?token={link_token(link)}")
    await user.should_see(marker="link-error", retries=50)
    await sign_in(user, "newhire@acme.example", STRONG)
    await user.should_see("New Hire")


async def test_a_member_is_kept_from_people_and_teams(user: User) -> None:
    await sign_in(user, "alice@acme.example")
    await user.should_not_see(marker="nav-people")
    await user.should_not_see(marker="nav-teams-and-permissions")
    for page in ("/people", "/teams"):
        await user.open(page)
        await user.should_see(marker="page-title", retries=50)
        await user.should_not_see(marker="invite-form")
        await user.should_not_see(marker="permission-grid")


async def test_an_admin_changes_a_role_and_deactivates_then_reactivates(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, "admin@acme.example", then="/people")
    await user.should_see(marker="role-bob@acme.example", retries=50)
    user.find(marker="role-bob@acme.example").elements.pop().value = "auditor"
    await user.should_see("bob@acme.example is now auditor", retries=50)
    user.find(marker="deactivate-alice@acme.example").click()
    await user.should_see(marker="reactivate-alice@acme.example", retries=50)
    people = {p["email"]: p for p in await assistant.call("admin@acme.example", "GET", "/api/company/people")}
    assert people["bob@acme.example"]["role"] == "auditor"
    assert people["alice@acme.example"]["status"] == "deactivated"
    user.find(marker="reactivate-alice@acme.example").click()
    await user.should_see(marker="deactivate-alice@acme.example", retries=50)
    people = {p["email"]: p for p in await assistant.call("admin@acme.example", "GET", "/api/company/people")}
    assert people["alice@acme.example"]["status"] == "active"


async def test_an_admin_makes_a_team_and_grants_a_dataset_in_the_grid(
    user: User, assistant: Assistant
) -> None:
    await sign_in(user, "admin@acme.example", then="/teams")
    await user.should_see(marker="team-name", retries=50)
    user.find(marker="team-name").type("Analysts")
    user.find(marker="create-team").click()
    await user.should_see(marker="members-Analysts", retries=50)
    bob = (await Person.select(Person.id).where(Person.email == "bob@acme.example").first())["id"]
    members = user.find(marker="members-Analysts").elements.pop()
    members.value = [bob]
    user.find(marker="save-members-Analysts").click()
    await user.should_see("Members saved", retries=50)
    teams = {t["name"]: t for t in await assistant.call("admin@acme.example", "GET", "/api/company/teams")}
    assert [m["email"] for m in teams["Analysts"]["members"]] == ["bob@acme.example"]
    await user.should_see(marker="grid-Team Analysts-employees", retries=50)
    cell = user.find(marker="grid-Team Analysts-employees").elements.pop()
    cell.value = "read"
    user.find(marker="save-permissions").click()
    await user.should_see("Permissions saved", retries=50)
    grid = await assistant.call("admin@acme.example", "GET", "/api/company/permissions")
    row = next(t for t in grid["teams"] if t["name"] == "Analysts")
    assert row["grants"] == {"employees": "read"}


async def test_a_person_changes_their_own_password_with_the_old_one(user: User) -> None:
    await sign_in(user, "alice@acme.example", then="/account")
    await user.should_see(marker="old-password", retries=50)
    user.find(marker="old-password").type("not-her-password")
    user.find(marker="new-password").type(STRONG)
    user.find(marker="change-password-button").click()
    await user.should_not_see("Password changed")
    assert await _signs_in("alice@acme.example", "demo")  # unchanged after the wrong old password
    user.find(marker="old-password").clear().type("demo")
    user.find(marker="change-password-button").click()
    await user.should_see("Password changed", retries=50)
    assert await _signs_in("alice@acme.example", STRONG)
    assert not await _signs_in("alice@acme.example", "demo")


async def _signs_in(email: str, password: str) -> bool:
    from backend.errors import NotAuthenticated
    from backend.tenancy import service

    try:
        await service.login(email, password)
    except NotAuthenticated:
        return False
    return True


@pytest.fixture
async def empty_user(empty_db: str) -> AsyncIterator[User]:
    session.configure(ApiConfig("http://api.test", transport=httpx.ASGITransport(app=_shared_app(empty_db))))
    async with user_simulation(main_file=CONSOLE_APP) as simulated:
        yield simulated


async def test_the_sign_in_page_of_an_empty_database_says_only_no_company_yet(empty_user: User) -> None:
    await empty_user.open("/login")
    await empty_user.should_see(marker="no-company", retries=50)
    await empty_user.should_see("No company yet")
    await empty_user.should_not_see(marker="email")  # nothing to sign in to, nothing else said


async def test_the_sign_in_page_of_a_company_has_no_such_note(user: User) -> None:
    await user.open("/login")
    await user.should_see(marker="email", retries=50)
    await user.should_not_see(marker="no-company")


async def test_a_reset_link_from_the_admin_sets_a_new_password_and_forgot_says_the_same_for_anyone(
    user: User,
) -> None:
    await sign_in(user, "admin@acme.example", then="/people")
    await user.should_see(marker="reset-bob@acme.example", retries=50)
    user.find(marker="reset-bob@acme.example").click()
    await user.should_see(marker="issued-link-url", retries=50)
    link = shown_link(user)
    await user.open("/logout")
    user.find(marker="confirm-sign-out").click()
    await user.should_see(marker="email", retries=50)
    await user.open(f"/set-password?token={link_token(link)}")
    await user.should_see("set a new password for Acme Analytics", retries=50)
    user.find(marker="new-password").type(STRONG)
    user.find(marker="repeat-password").type(STRONG)
    user.find(marker="set-password").click()
    await user.should_see(marker="password-set", retries=50)
    assert await _signs_in("bob@acme.example", STRONG)
    answers = []
    for address in ("bob@acme.example", "nobody@acme.example"):  # a person, and an address nobody has
        await user.open("/forgot-password")
        user.find(marker="forgot-email").type(address)
        user.find(marker="send-reset").click()
        await user.should_see("If this address belongs", retries=50)
        answers.append(next(iter(user.find(marker="forgot-answer").elements)).text)
    assert answers[0] == answers[1]
