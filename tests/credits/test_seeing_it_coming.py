"""Seeing it coming, through the API (issue 29, item 4). `GET /api/credits` carries the forecast computed at
the one clock (backend/clock.py, fixed here): this week's rate from the last seven days' charges of every
kind, what is left counting approved runs' holds as spent; its existing fields unchanged. The run detail of
a run awaiting approval carries its maximum cost (what approving it reserves) beside what is left of the
pool and of an admin's limit when that is tighter, and `covered` says what the approval then answers: a run
shown as not covered is refused 402, its control shown covered is queued. On SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backend import clock
from backend.credits.platform import token_key
from backend.credits.tables import CreditCharge, PlatformCharge
from backend.tenancy.tables import Company, User
from tests.support.credits import LIMITS, MAX_COST
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

pytestmark = pytest.mark.sqlite

# after the seed's own dates, so nothing it holds falls in this period or this week
NOW = datetime(2030, 3, 10, 12, 0, tzinfo=UTC)

EXISTING_FIELDS = {
    "pool",
    "used",
    "reserved",
    "remaining",
    "period_start",
    "minimum_charge",
    "rates",
    "usage_by_day",
    "usage_by_user",
    "costliest_runs",
    "costliest_flows",
    "usage_by_kind",
    "plan",
    "plan_credits",
    "top_ups",
    "limit_per_person",
    "limit_per_day",
}


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> datetime:
    monkeypatch.setattr(clock, "now", lambda: NOW)
    return NOW


async def _ids() -> tuple[int, int]:
    acme = await Company.select(Company.id).where(Company.name == "Acme Analytics").first()
    alice = await User.select(User.id).where(User.email == "alice@acme.example").first()
    return acme["id"], alice["id"]


async def _set(**values: int) -> None:
    await Company.update({getattr(Company, k): v for k, v in values.items()}).where(
        Company.name == "Acme Analytics"
    )


async def _charge(kind: str, credits: float, at: datetime) -> None:
    acme, alice = await _ids()
    if kind == "run":
        await CreditCharge.insert(
            CreditCharge(
                company=acme,
                user=alice,
                run_id=0,
                run_title="earlier",
                credits=credits,
                vcpu_seconds=0.0,
                gib_seconds=0.0,
                at=at,
            )
        )
        return
    key = f"{kind}-{at.isoformat()}"
    await PlatformCharge.insert(
        PlatformCharge(
            company=acme,
            user=alice,
            kind=kind,
            credits=credits,
            idempotency_key=key,
            token_key=token_key(0, key),
            at=at,
        )
    )


async def _propose(client: Any, email: str = "alice@acme.example") -> dict[str, Any]:
    token = await token_for(client, email)
    r = await client.post("/api/runs", json=proposal(limits=LIMITS), headers=token)
    assert r.status_code == 201, r.text
    return r.json()


async def _get(client: Any, path: str, email: str = "admin@acme.example") -> dict[str, Any]:
    client.cookies.clear()
    await login(client, email)
    r = await client.get(path)
    assert r.status_code == 200, r.text
    client.cookies.clear()
    return r.json()


async def test_get_credits_carries_the_forecast_at_this_weeks_rate(client, fixed_clock) -> None:
    await enable_code()
    await _set(credit_pool=10_000)
    quiet = await _get(client, "/api/credits")
    assert set(quiet) >= EXISTING_FIELDS
    assert quiet["period_start"].startswith("2030-03-01T00:00:00")
    assert quiet["period_end"].startswith("2030-04-01T00:00:00")
    assert quiet["forecast"]["status"] == "no_usage" and quiet["forecast"]["runs_out_on"] is None

    run = await _propose(client)  # approved and not yet finished: it holds its maximum cost, 4.00
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    await _charge("run", 28.0, NOW - timedelta(days=1))
    await _charge("chat_turn", 42.0, NOW - timedelta(days=2))
    await _charge("chat_turn", 100.0, NOW - timedelta(days=9))  # this period, but not this week
    await _set(credit_pool=28 + 42 + 100 + 4 + 140)  # 140 left, counting the hold as spent

    usage = await _get(client, "/api/credits")
    assert set(usage) >= EXISTING_FIELDS
    assert (usage["used"], usage["reserved"], usage["remaining"]) == (170.0, MAX_COST, 140.0)
    f = usage["forecast"]
    assert f["status"] == "runs_out"
    assert f["charged_this_week_by_kind"] == {"chat_turn": 42.0, "run": 28.0}
    assert (f["charged_this_week"], f["rate_per_day"], f["window_days"]) == (70.0, 10.0, 7)
    assert (f["left"], f["reserved"]) == (140.0, MAX_COST)
    assert f["runs_out_on"] == "2030-03-24"  # 140 left at 10 a day: 14 days
    assert f["runs_out_at"].startswith("2030-03-24T12:00:00")
    assert "the pool lasts until 24 March 2030" in f["summary"]
    assert "4.00 of them held by approved runs not yet finished" in f["summary"]
    # a member sees the same pool and the same forecast (not who spent it)
    assert (await _get(client, "/api/credits", "bob@acme.example"))["forecast"] == f

    await _set(credit_pool=174 + 1000)  # 1000 left: 100 days at this rate, past 31 March
    lasts = (await _get(client, "/api/credits"))["forecast"]
    assert lasts["status"] == "lasts" and lasts["runs_out_on"] is None
    assert "lasts past the period's end, 31 March 2030" in lasts["summary"]

    await _set(credit_pool=170)  # the charges took it all; the hold takes it below zero
    used_up = (await _get(client, "/api/credits"))["forecast"]
    assert used_up["status"] == "used_up" and used_up["left"] == -MAX_COST
    assert "The pool is used up" in used_up["summary"]


async def test_the_approval_screen_shows_the_maximum_cost_beside_what_is_left(client, fixed_clock) -> None:
    await enable_code()
    await _set(credit_pool=1000)
    first, second = await _propose(client), await _propose(client)
    await _charge("chat_turn", 3.0, NOW - timedelta(hours=1))

    shown = (await _get(client, f"/api/runs/{first['id']}", "alice@acme.example"))["approval_cost"]
    assert shown == {
        "max_cost": MAX_COST,  # its limits at their whole wall time: what approving it reserves
        "pool": 1000,
        "reserved": 0.0,
        "pool_left": 997.0,
        "limit": None,
        "left": 997.0,
        "covered": True,
    }
    assert (await approve_as(client, "alice@acme.example", first)).status_code == 200
    pool_after = (await _get(client, "/api/credits"))["remaining"]
    assert pool_after == 997.0 - MAX_COST

    # the admin's per-person limit, tighter than the pool: alice took 3 + 4 (held) of 10
    await _set(credit_limit_per_person=10)
    shown = (await _get(client, f"/api/runs/{second['id']}", "alice@acme.example"))["approval_cost"]
    assert shown["pool_left"] == pool_after and shown["reserved"] == MAX_COST
    assert shown["limit"] == {"kind": "per_person", "limit": 10, "taken": 7.0, "left": 3.0}
    assert shown["left"] == 3.0 and shown["covered"] is False
    refused = await approve_as(client, "alice@acme.example", second)
    assert refused.status_code == 402 and refused.json()["error"] == "credit_limit"

    # a per-day limit tighter still is the one shown; a looser one is not
    await _set(credit_limit_per_person=100, credit_limit_per_day=12)
    shown = (await _get(client, f"/api/runs/{second['id']}", "alice@acme.example"))["approval_cost"]
    assert shown["limit"] == {
        "kind": "per_day",
        "limit": 12,
        "taken": 7.0,
        "left": 5.0,
    }  # today's 3, the hold
    assert shown["covered"] is True

    # control: the same run, shown covered, is queued
    assert (await approve_as(client, "alice@acme.example", second)).status_code == 200
    decided = await _get(client, f"/api/runs/{second['id']}", "alice@acme.example")
    assert decided["status"] == "queued" and decided["approval_cost"] is None
