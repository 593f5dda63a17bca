"""The review page's charts are pure: a report's rows in, a plotly figure out. A row gives only the fields
its chart reads (`model_construct`: the report's schema, unvalidated)."""

from backend.review.schemas import (
    AcceptedPerPerson,
    ApprovedDespiteWarning,
    RejectionRate,
    UnreviewedFollowup,
)
from console import charts


def test_warned_approvals_count_each_approvers_runs_by_worst_warning() -> None:
    rows = [
        ApprovedDespiteWarning.model_construct(approved_by="maria@x", worst="high"),
        ApprovedDespiteWarning.model_construct(approved_by="maria@x", worst="medium"),
        ApprovedDespiteWarning.model_construct(approved_by="alice@x", worst="high"),
    ]
    high, medium = charts.warned_approvals(rows).data
    assert (high.name, list(high.y), list(high.x)) == ("high", ["alice@x", "maria@x"], [1, 1])
    assert (medium.name, list(medium.x)) == ("medium", [0, 1])


def test_rejection_rate_is_a_percentage_with_the_highest_on_top() -> None:
    (bar,) = charts.rejection_rate(
        [
            RejectionRate.model_construct(person="a@x", rate=0.5, approved=1, rejected=1),
            RejectionRate.model_construct(person="b@x", rate=0.25, approved=3, rejected=1),
        ]
    ).data
    assert list(bar.y) == ["b@x", "a@x"] and list(bar.x) == [25.0, 50.0]


def test_accepted_and_followups_per_person() -> None:
    (bar,) = charts.accepted_per_person(
        [
            AcceptedPerPerson.model_construct(person="a@x", accepted=3),
            AcceptedPerPerson.model_construct(person="b@x", accepted=1),
        ]
    ).data
    assert list(bar.y) == ["b@x", "a@x"] and list(bar.x) == [1, 3]
    (bar,) = charts.followups_per_person(
        [
            UnreviewedFollowup.model_construct(requested_by="a@x"),
            UnreviewedFollowup.model_construct(requested_by="a@x"),
        ]
    ).data
    assert list(bar.x) == [2]


def test_empty_reports_give_empty_charts() -> None:
    for build in (
        charts.warned_approvals,
        charts.followups_per_person,
        charts.accepted_per_person,
        charts.rejection_rate,
    ):
        assert not build([]).data
