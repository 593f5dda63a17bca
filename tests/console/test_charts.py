"""Chart builders are pure: the API's schemas in, plotly figure out."""

from backend.credits.schemas import DayUsage, PersonUsage
from console import charts


def test_usage_by_day_is_bars_in_date_order() -> None:
    figure = charts.usage_by_day(
        [
            DayUsage(day="2026-11-03", credits=4),
            DayUsage(day="2026-11-01", credits=2.5),
            DayUsage(day="2026-11-02", credits=0),
        ]
    )
    (bar,) = figure.data
    assert bar.type == "bar"
    assert list(bar.x) == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert list(bar.y) == [2.5, 0, 4]


def test_usage_by_user_puts_the_biggest_spender_on_top() -> None:
    figure = charts.usage_by_user(
        [PersonUsage(email="a@x", credits=10), PersonUsage(email="b@x", credits=30)]
    )
    (bar,) = figure.data
    assert bar.orientation == "h"
    assert list(bar.y) == ["a@x", "b@x"]  # plotly draws the last category at the top
    assert list(bar.x) == [10, 30]


def test_no_usage_gives_an_empty_chart_that_says_so() -> None:
    for figure in (charts.usage_by_day([]), charts.usage_by_user([])):
        assert not figure.data
        assert "No" in figure.layout.annotations[0].text
