"""Seeing it coming: where this week's rate of spending takes the company's pool before the period ends.

"This week's rate" is what was charged in the last seven days (runs and the assistant platform's chat turns
and other kinds alike), divided by seven: credits a day. The seven days run back from now, across the start
of a period too (the rate says how fast the company spends, whichever period's pool paid for it).

What is left is the pool less what was charged this period and less what approved runs not yet finished hold
(their maximum cost, reserved when they were approved): those credits are committed, so they count as spent.
The pool runs out the moment what is left reaches zero at that rate. Pure: every input is an argument, the
clock's reading (`now`) too.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta

from backend.credits.schemas import Forecast

WINDOW_DAYS = 7
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def period_start(now: datetime) -> datetime:
    """The start of the period `now` falls in: the calendar month, UTC."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def period_end(now: datetime) -> datetime:
    """When the period `now` falls in ends (and the pool fills again): the next month's first instant, UTC."""
    start = period_start(now)
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


def day_text(day: date) -> str:
    """24 March 2026 (the same in every locale)."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def forecast(
    *,
    pool: float,
    used: float,
    reserved: float,
    charged_this_week: Mapping[str, float],
    now: datetime,
    minimum: float,
) -> Forecast:
    """Where this week's rate takes the pool. `pool`: this period's pool (plan and top-ups); `used`: this
    period's charges; `reserved`: what approved, unfinished runs hold (counted as spent); `charged_this_week`:
    the credits charged in the last seven days per kind ("run", "chat_turn", ...); `minimum`: what a run
    needs left before it may be proposed or approved (below it the pool is used up).

    status: "used_up" (less than `minimum` left now), "no_usage" (nothing charged in seven days: no date the
    pool runs out), "runs_out" (it runs out before the period ends, on `runs_out_on`), or "lasts" (it lasts
    past the period's end)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"forecast needs an aware time for now, got {now!r}")
    for name, value in (("pool", pool), ("used", used), ("reserved", reserved), ("minimum", minimum)):
        if value < 0:
            raise ValueError(f"forecast: {name} cannot be negative, got {value}")
    for kind, value in charged_this_week.items():
        if value < 0:
            raise ValueError(f"forecast: what {kind!r} charged this week cannot be negative, got {value}")
    now = now.astimezone(UTC)
    end = period_end(now)
    last_day = day_text((end - timedelta(days=1)).date())
    by_kind = {kind: round(c, 2) for kind, c in sorted(charged_this_week.items()) if c > 0}
    week = round(sum(charged_this_week.values()), 2)
    rate = round(week / WINDOW_DAYS, 2)
    left = round(pool - used - reserved, 2)
    held = f" ({reserved:.2f} of them held by approved runs not yet finished)" if reserved else ""
    fields = {
        "as_of": now,
        "window_days": WINDOW_DAYS,
        "charged_this_week": week,
        "charged_this_week_by_kind": by_kind,
        "rate_per_day": rate,
        "rate_per_day_by_kind": {kind: round(c / WINDOW_DAYS, 2) for kind, c in by_kind.items()},
        "left": left,
        "reserved": round(reserved, 2),
        "period_end": end,
    }
    rate_text = (
        f"{rate:.2f} credits a day: the {week:.2f} charged in the last {WINDOW_DAYS} days, over {WINDOW_DAYS}"
    )
    if left < minimum:
        return Forecast(
            status="used_up",
            summary=f"The pool is used up: {max(left, 0):.2f} of {pool:g} credits left{held}, less than the "
            f"{minimum:.2f} a run needs. It fills again when the next period starts, {day_text(end.date())}.",
            **fields,
        )
    if week <= 0:
        return Forecast(
            status="no_usage",
            summary=f"Nothing was charged in the last {WINDOW_DAYS} days: at this rate the pool lasts past "
            f"the period's end, {last_day} ({left:.2f} credits left{held}).",
            **fields,
        )
    runs_out_at = now + timedelta(days=left * WINDOW_DAYS / week)  # the unrounded rate
    if runs_out_at >= end:
        return Forecast(
            status="lasts",
            summary=f"At this week's rate ({rate_text}) the pool lasts past the period's end, {last_day} "
            f"({left:.2f} credits left{held}).",
            **fields,
        )
    return Forecast(
        status="runs_out",
        runs_out_at=runs_out_at,
        runs_out_on=runs_out_at.date(),
        summary=f"At this week's rate ({rate_text}) the pool lasts until {day_text(runs_out_at.date())} "
        f"({left:.2f} credits left{held}), before the period's end, {last_day}.",
        **fields,
    )
