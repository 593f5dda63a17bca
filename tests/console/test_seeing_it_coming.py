"""Seeing it coming in the console (issue 29, item 4): the credits page shows the API's forecast and says what
"this week's rate" is; the approval screen shows the run's maximum cost beside what is left of the pool, and
of an admin's limit when that is tighter, with a warning when it cannot be covered. Each beside its control."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nicegui.testing.user import User

from backend import clock
from backend.credits.platform import token_key
from backend.credits.tables import PlatformCharge
from backend.tenancy.tables import Company
from backend.tenancy.tables import User as Person
from console import widgets
from tests.support.console import Assistant, sign_in
from tests.support.credits import LIMITS, MAX_COST

pytestmark = pytest.mark.sqlite


async def _set(**values: int) -> None:
    await Company.update({getattr(Company, k): v for k, v in values.items()}).where(
        Company.name == "Acme Analytics"
    )


async def _chat_turn(credits: float) -> None:
    acme = await Company.select(Company.id).where(Company.name == "Acme Analytics").first()
    alice = await Person.select(Person.id).where(Person.email == "alice@acme.example").first()
    await PlatformCharge.insert(
        PlatformCharge(
            company=acme["id"],
            user=alice["id"],
            kind="chat_turn",
            credits=credits,
            idempotency_key=f"turn-{credits}",
            token_key=token_key(0, f"turn-{credits}"),
            at=clock.now() - timedelta(hours=1),
        )
    )


def _text(user: User, marker: str) -> str:
    return user.find(marker=marker).elements.pop().text


async def test_the_credits_page_shows_the_forecast_and_what_the_rate_is(
    user: User, assistant: Assistant
) -> None:
    await assistant.enable_code_execution()
    await _set(credit_pool=10_000)
    await _chat_turn(3.0)  # 3 in a week: 0.43 a day, the pool lasts far past the period's end
    await sign_in(user, "admin@acme.example", then="/credits")
    await user.should_see(marker="forecast", retries=50)
    await user.should_see(marker="forecast-lasts")
    assert _text(user, "forecast-lasts").startswith("At this week's rate (0.43 credits a day")
    assert "lasts past the period's end" in _text(user, "forecast-lasts")
    assert "charged in the last 7 days" in _text(user, "forecast-definition")
    assert "counts as already spent" in _text(user, "forecast-definition")
    assert _text(user, "kind-chat_turn-note") == "0.43 a day this week"
    await user.should_not_see(marker="forecast-used_up")

    await _set(credit_pool=2)  # control: the same week, a pool the chat turn went past
    await user.open("/credits")
    await user.should_see(marker="forecast-used_up", retries=50)
    assert _text(user, "forecast-used_up").startswith("The pool is used up")
    await user.should_not_see(marker="forecast-lasts")


async def test_the_approval_screen_shows_the_maximum_cost_beside_what_is_left(
    user: User, assistant: Assistant
) -> None:
    await assistant.enable_code_execution()
    await _set(credit_pool=1000)
    await _chat_turn(3.0)
    run = await assistant.propose(limits=LIMITS)
    await sign_in(user, "alice@acme.example", then=f"/runs/{run['id']}")
    await user.should_see(marker="approval-cost", retries=50)
    assert _text(user, "max-cost").startswith(f"Maximum cost {widgets.number(MAX_COST)} credits")
    assert _text(user, "pool-left") == "· 997 of 1,000 credits left in the pool"
    await user.should_not_see(marker="limit-left")
    await user.should_not_see(marker="cost-not-covered")
    await user.should_see(marker="approve")

    await _set(credit_limit_per_person=5)  # alice's chat turn took 3 of 5: 2 left, less than the run's 4
    await user.open(f"/runs/{run['id']}")
    await user.should_see(marker="limit-left", retries=50)
    assert _text(user, "limit-left") == "· 2 left of the limit of 5 credits a person this period, the tighter"
    await user.should_see(marker="cost-not-covered")
    await user.should_see("That is more than the 2 credits left: approving it will be refused.")
