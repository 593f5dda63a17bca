"""Chart builders: pure functions from the API's schemas to plotly figures (testable without a browser)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from backend.credits.schemas import DayUsage, PersonUsage
from backend.review.schemas import (
    AcceptedPerPerson,
    ApprovedDespiteWarning,
    RejectionRate,
    UnreviewedFollowup,
)

PRIMARY = "#1f4e79"
ACCENT = "#0f766e"


def _empty(title: str, message: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(
        title=title,
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[{"text": message, "showarrow": False, "font": {"size": 14, "color": "#6b7280"}}],
        height=320,
        margin={"l": 40, "r": 20, "t": 50, "b": 40},
    )
    return figure


KIND_LABELS = {"run": "runs", "chat_turn": "chat turns"}
KIND_COLORS = [PRIMARY, "#b45309", ACCENT, "#7c3aed", "#be123c"]


def kinds(rows: Sequence[DayUsage | PersonUsage]) -> list[str]:
    """The kinds of charge in `rows` (each with `by_kind`): runs first, then the platform's, by name."""
    found = {k for r in rows for k in r.by_kind}
    return sorted(found, key=lambda k: (k != "run", k))


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind.replace("_", " "))


def _bars(rows: Sequence[DayUsage | PersonUsage], at: list[str], *, horizontal: bool = False) -> list[go.Bar]:
    """One bar series per kind of charge (runs, chat turns, ...), stacked; a single series without kinds."""
    series = kinds(rows) or [None]
    bars = []
    for n, kind in enumerate(series):
        values = [float(r.by_kind.get(kind, 0) if kind else r.credits or 0) for r in rows]
        label = kind_label(kind) if kind else "credits"
        bars.append(
            go.Bar(
                name=label,
                x=values if horizontal else at,
                y=at if horizontal else values,
                orientation="h" if horizontal else "v",
                marker_color=KIND_COLORS[n % len(KIND_COLORS)]
                if kind
                else (ACCENT if horizontal else PRIMARY),
                hovertemplate=(
                    f"%{{y}}: %{{x}} credits ({label})" if horizontal else f"%{{x}}: %{{y}} credits ({label})"
                )
                + "<extra></extra>",
            )
        )
    return bars


def usage_by_day(points: list[DayUsage]) -> go.Figure:
    """Credits charged per day, oldest first, as bars stacked by kind (runs, chat turns, ...)."""
    title = "Credits used per day"
    points = sorted((p for p in points if p.day), key=lambda p: str(p.day))
    if not points:
        return _empty(title, "No credits used in this period")
    figure = go.Figure(_bars(points, [str(p.day)[:10] for p in points]))
    figure.update_layout(
        title=title,
        barmode="stack",
        xaxis={"title": "day", "type": "category"},
        yaxis={"title": "credits", "rangemode": "tozero"},
        bargap=0.6 if len(points) < 4 else 0.2,
        height=320,
        margin={"l": 50, "r": 20, "t": 50, "b": 50},
    )
    return figure


def usage_by_user(rows: list[PersonUsage]) -> go.Figure:
    """Credits per person, largest on top, as horizontal bars stacked by kind (their runs, their chat turns)."""
    title = "Credits used per person"
    rows = sorted(rows, key=lambda r: float(r.credits or 0))
    if not rows:
        return _empty(title, "Nobody has used credits yet")
    figure = go.Figure(_bars(rows, [str(r.email or "?") for r in rows], horizontal=True))
    figure.update_layout(
        title=title,
        barmode="stack",
        xaxis={"title": "credits", "rangemode": "tozero"},
        height=max(240, 60 + 32 * len(rows)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure


SEVERITY_COLORS = {"high": "#b91c1c", "medium": "#d97706"}


def _per_person_height(count: int) -> int:
    return max(240, 60 + 32 * count)


def warned_approvals(rows: list[ApprovedDespiteWarning]) -> go.Figure:
    """Runs approved despite a warning, per approver, stacked by the worst warning shown (high, medium)."""
    title = "Runs approved despite a warning, per approver"
    if not rows:
        return _empty(title, "No run was approved despite a high or medium warning")
    approvers = sorted({str(r.approved_by or "?") for r in rows})
    bars = [
        go.Bar(
            name=level,
            x=[sum(1 for r in rows if r.approved_by == a and r.worst == level) for a in approvers],
            y=approvers,
            orientation="h",
            marker_color=SEVERITY_COLORS[level],
            hovertemplate=f"%{{y}}: %{{x}} run(s), worst warning {level}<extra></extra>",
        )
        for level in ("high", "medium")
    ]
    figure = go.Figure(bars)
    figure.update_layout(
        title=title,
        barmode="stack",
        xaxis={"title": "runs", "rangemode": "tozero", "dtick": 1},
        height=_per_person_height(len(approvers)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure


def followups_per_person(rows: list[UnreviewedFollowup]) -> go.Figure:
    """Follow-ups that ran without a second approval, per person who asked for them."""
    title = "Follow-ups run without review, per person"
    if not rows:
        return _empty(title, "No follow-up ran without review")
    people = sorted({str(r.requested_by or "?") for r in rows})
    counts = [sum(1 for r in rows if r.requested_by == p) for p in people]
    figure = go.Figure(
        go.Bar(
            x=counts,
            y=people,
            orientation="h",
            marker_color=ACCENT,
            hovertemplate="%{y}: %{x} follow-up(s)<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        xaxis={"title": "follow-ups", "rangemode": "tozero", "dtick": 1},
        height=_per_person_height(len(people)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure


def accepted_per_person(rows: list[AcceptedPerPerson]) -> go.Figure:
    """Proposed changes each person accepted, most on top."""
    title = "Proposed changes accepted, per person"
    rows = sorted(rows, key=lambda r: int(r.accepted or 0))
    if not rows:
        return _empty(title, "Nobody has accepted a proposed change")
    figure = go.Figure(
        go.Bar(
            x=[int(r.accepted or 0) for r in rows],
            y=[str(r.person or "?") for r in rows],
            orientation="h",
            marker_color=PRIMARY,
            hovertemplate="%{y}: %{x} accepted<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        xaxis={"title": "changes accepted", "rangemode": "tozero"},
        height=_per_person_height(len(rows)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure


def rejection_rate(rows: list[RejectionRate]) -> go.Figure:
    """The share of their run decisions each person rejected, in percent, with the counts on hover."""
    title = "Runs rejected, share of each person's decisions"
    rows = sorted(rows, key=lambda r: float(r.rate or 0))
    if not rows:
        return _empty(title, "Nobody has decided a run yet")
    figure = go.Figure(
        go.Bar(
            x=[round(100 * float(r.rate or 0), 1) for r in rows],
            y=[str(r.person or "?") for r in rows],
            orientation="h",
            marker_color="#be123c",
            customdata=[[r.rejected, r.approved] for r in rows],
            hovertemplate="%{y}: %{x}% (%{customdata[0]} rejected, %{customdata[1]} approved)<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        xaxis={"title": "% rejected", "range": [0, 100]},
        height=_per_person_height(len(rows)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure
