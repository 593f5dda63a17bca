"""The forecast on the credits page, as a pure function at a fixed clock: this week's rate (the last seven
days' charges, every kind, over seven) takes what is left (the pool less this period's charges and what
approved runs hold) to a day before the period ends, past it, or nowhere (no usage); a pool with less than
a run's minimum left is used up whatever the rate. Bad input is refused with a message naming it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from backend.credits import forecast as fc

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)  # the period is March 2026: it ends at 1 April 00:00 UTC
END = datetime(2026, 4, 1, tzinfo=UTC)


def _forecast(**kw):
    args = {"pool": 1000.0, "used": 0.0, "reserved": 0.0, "charged_this_week": {}, "now": NOW, "minimum": 1.0}
    return fc.forecast(**{**args, **kw})


def test_this_weeks_rate_runs_the_pool_out_on_a_day_before_the_period_ends() -> None:
    # 70 charged in seven days (runs 28, chat turns 42): 10 a day; 200 left lasts 20 days, to 30 March 12:00
    f = _forecast(pool=1000, used=800, charged_this_week={"run": 28.0, "chat_turn": 42.0})
    assert f.status == "runs_out"
    assert f.rate_per_day == 10.0 and f.charged_this_week == 70.0 and f.window_days == 7
    assert f.rate_per_day_by_kind == {"chat_turn": 6.0, "run": 4.0}
    assert f.left == 200.0
    assert f.runs_out_at == datetime(2026, 3, 30, 12, 0, tzinfo=UTC)
    assert f.runs_out_on == date(2026, 3, 30)
    assert f.period_end == END and f.as_of == NOW
    assert "the pool lasts until 30 March 2026" in f.summary
    assert "10.00 credits a day" in f.summary and "last 7 days" in f.summary


def test_reservations_count_as_committed() -> None:
    # the same week, but approved runs not yet finished hold 100 of the 200: 10 days left, to 20 March
    f = _forecast(pool=1000, used=800, reserved=100, charged_this_week={"run": 70.0})
    assert f.status == "runs_out" and f.left == 100.0 and f.reserved == 100.0
    assert f.runs_out_on == date(2026, 3, 20)
    assert "100.00 of them held by approved runs not yet finished" in f.summary


def test_a_slow_week_lasts_past_the_periods_end() -> None:
    # 7 in seven days: 1 a day; 200 left would last 200 days, far past 31 March
    f = _forecast(pool=1000, used=800, charged_this_week={"chat_turn": 7.0})
    assert f.status == "lasts"
    assert f.runs_out_at is None and f.runs_out_on is None
    assert "lasts past the period's end, 31 March 2026" in f.summary
    # the boundary: 21 days before the period ends, 210 left at 10 a day reach its very end: that lasts
    march_11 = datetime(2026, 3, 11, tzinfo=UTC)
    edge = _forecast(now=march_11, pool=1000, used=790, charged_this_week={"run": 70.0})
    assert edge.status == "lasts"
    # control: a little faster and it runs out on the last day
    faster = _forecast(now=march_11, pool=1000, used=790, charged_this_week={"run": 71.0})
    assert faster.status == "runs_out" and faster.runs_out_on == date(2026, 3, 31)


def test_no_usage_gives_no_date() -> None:
    f = _forecast(pool=1000, used=300)
    assert f.status == "no_usage" and f.rate_per_day == 0.0
    assert f.runs_out_at is None and f.runs_out_on is None
    assert "Nothing was charged in the last 7 days" in f.summary
    # kinds that charged nothing are no usage either
    assert _forecast(pool=1000, charged_this_week={"run": 0.0}).status == "no_usage"
    # control: any charge this week gives a rate
    assert _forecast(pool=1000, charged_this_week={"run": 0.5}).rate_per_day == 0.07


def test_a_used_up_pool_is_used_up_whatever_the_rate() -> None:
    over = _forecast(pool=100, used=104.5, charged_this_week={"chat_turn": 50.0})  # a chat turn went over
    assert over.status == "used_up" and over.left == -4.5
    assert over.runs_out_at is None
    assert "The pool is used up: 0.00 of 100 credits left" in over.summary
    assert "fills again when the next period starts, 1 April 2026" in over.summary
    # less than the minimum a run needs left is used up too, even with nothing charged this week
    assert _forecast(pool=100, used=99.5).status == "used_up"
    # held by approved runs: used up for the next approval although nothing more was charged
    held = _forecast(pool=100, used=60, reserved=40)
    assert held.status == "used_up" and "40.00 of them held" in held.summary
    # control: exactly the minimum left is not used up
    assert _forecast(pool=100, used=99).status == "no_usage"


def test_the_period_is_the_calendar_month_in_utc() -> None:
    assert fc.period_end(datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    assert fc.period_end(datetime(2026, 2, 1, tzinfo=UTC)) == datetime(2026, 3, 1, tzinfo=UTC)
    # 1 April 01:00 in UTC+2 is still 31 March in UTC: March's period
    east = datetime(2026, 4, 1, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    assert fc.period_start(east) == datetime(2026, 3, 1, tzinfo=UTC)
    f = _forecast(now=east)
    assert f.period_end == END and f.as_of.tzinfo == UTC


def test_bad_input_is_refused_with_what_was_wrong() -> None:
    with pytest.raises(ValueError, match="aware time"):
        _forecast(now=datetime(2026, 3, 10, 12, 0))
    with pytest.raises(ValueError, match="reserved cannot be negative"):
        _forecast(reserved=-1)
    with pytest.raises(ValueError, match="'run' charged this week cannot be negative"):
        _forecast(charged_this_week={"run": -3.0})
    _forecast(reserved=0, charged_this_week={"run": 3.0})  # control: the same calls, valid, pass
