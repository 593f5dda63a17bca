import pytest
from nicegui import ui
from nicegui.testing.user import User

from tests.support.console import sign_in

pytestmark = pytest.mark.sqlite


async def test_signed_out_visitor_is_sent_to_sign_in(user: User) -> None:
    await user.open("/runs")
    await user.should_see("Sign in")


async def test_wrong_password_is_a_readable_message(user: User) -> None:
    await user.open("/login")
    user.find(marker="email").type("alice@acme.example")
    user.find(marker="password").type("nope")
    user.find(marker="sign-in").click()
    await user.should_see("email or password is not correct", retries=50)


async def test_admin_sees_admin_pages_in_the_menu(user: User) -> None:
    await sign_in(user, "admin@acme.example")
    for item in ("nav-settings", "nav-credits", "nav-audit", "nav-health"):
        await user.should_see(marker=item)
    await user.should_see("Ada Admin")


async def test_member_sees_only_runs(user: User) -> None:
    await sign_in(user, "alice@acme.example")
    await user.should_see("My runs")
    for item in ("nav-settings", "nav-credits", "nav-audit", "nav-health"):
        await user.should_not_see(marker=item)


async def test_member_is_kept_out_of_admin_pages(user: User) -> None:
    await sign_in(user, "alice@acme.example")
    await user.open("/settings")
    await user.should_see("My runs")
    await user.should_not_see(marker="code-execution")


async def test_sign_out_from_the_user_menu(user: User) -> None:
    await sign_in(user, "alice@acme.example")
    user.find(marker="user-menu").click()
    user.find(ui.menu_item).click()
    await user.should_see("Sign in", retries=50)
