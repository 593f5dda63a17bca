"""Chart builders: pure functions from the API's schemas to plotly figures (testable without a browser)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from backend.credits.schemas import DayUsage, PersonUsage
from backend.review.schemas import (
    AcceptedPerPerson,
    ApprovedDespiteWarning,
    FindingsOnDay,
    RejectionRate,
    UnreviewedFollowup,
)
from backend.runs.schemas import QueueHistory, RunStats
from backend.runs.status import RunStatus

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


# a run's status by the colours of its badge (console/widgets.py STATUS_COLORS), as plotly colours
RUN_STATUS_COLORS = {
    RunStatus.awaiting_approval: "#d97706",
    RunStatus.queued: "#64748b",
    RunStatus.running: "#2563eb",
    RunStatus.succeeded: "#15803d",
    RunStatus.failed: "#b91c1c",
    RunStatus.timed_out: "#dc2626",
    RunStatus.out_of_memory: "#991b1b",
    RunStatus.error: "#7f1d1d",
    RunStatus.cancelled: "#9ca3af",
    RunStatus.rejected: "#6b7280",
}
CATEGORY_COLORS = [PRIMARY, "#b45309", ACCENT, "#7c3aed", "#be123c", "#0369a1", "#4d7c0f", "#a21caf"]


def _day_axis(title: str, figure: go.Figure, count: int, y_title: str) -> go.Figure:
    figure.update_layout(
        title=title,
        xaxis={"title": "day", "type": "category"},
        yaxis={"title": y_title, "rangemode": "tozero"},
        bargap=0.6 if count < 4 else 0.2,
        height=320,
        margin={"l": 50, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def runs_per_day(stats: RunStats) -> go.Figure:
    """Runs proposed per day, stacked by their status now (statuses in the product's order)."""
    title = f"Runs per day by status (last {stats.days} days)"
    days = [d for d in stats.runs_per_day if d.by_status]
    if not days:
        return _empty(title, "No runs in this period")
    found = {status for d in days for status in d.by_status}
    order = [s.value for s in RunStatus if s.value in found] + sorted(found - {s.value for s in RunStatus})
    bars = [
        go.Bar(
            name=status.replace("_", " "),
            x=[d.day for d in days],
            y=[d.by_status.get(status, 0) for d in days],
            marker_color=RUN_STATUS_COLORS.get(status, "#9ca3af"),
            hovertemplate=f"%{{x}}: %{{y}} {status.replace('_', ' ')}<extra></extra>",
        )
        for status in order
    ]
    return _day_axis(title, go.Figure(bars).update_layout(barmode="stack"), len(days), "runs")


def run_timings(stats: RunStats) -> go.Figure:
    """The median VM start and the median run duration of the runs that finished each day (seconds)."""
    title = "VM start and run duration, median per day"
    days = [d for d in stats.timings_per_day if d.vm_start_p50_seconds is not None or d.duration_p50_seconds]
    if not days:
        return _empty(title, "No run finished in this period")
    lines = [
        go.Scatter(
            name=name,
            x=[d.day for d in days],
            y=[getattr(d, field) for d in days],
            mode="lines+markers",
            line={"color": color},
            customdata=[d.runs for d in days],
            hovertemplate=f"%{{x}}: %{{y:.1f}} s {name} (%{{customdata}} run(s))<extra></extra>",
        )
        for name, field, color in (
            ("VM start p50", "vm_start_p50_seconds", ACCENT),
            ("duration p50", "duration_p50_seconds", PRIMARY),
        )
    ]
    return _day_axis(title, go.Figure(lines), len(days), "seconds")


def findings_over_time(rows: list[FindingsOnDay]) -> go.Figure:
    """Findings shown on approval screens per day (by the day their runs were proposed), by category."""
    title = "Findings per day, by category"
    rows = [r for r in rows if r.by_category]
    if not rows:
        return _empty(title, "No findings in this period")
    categories = sorted(
        {c for r in rows for c in r.by_category},
        key=lambda c: (-sum(r.by_category.get(c, 0) for r in rows), c),
    )
    bars = [
        go.Bar(
            name=category.replace("_", " "),
            x=[r.day for r in rows],
            y=[r.by_category.get(category, 0) for r in rows],
            marker_color=CATEGORY_COLORS[n % len(CATEGORY_COLORS)],
            hovertemplate=f"%{{x}}: %{{y}} {category.replace('_', ' ')}<extra></extra>",
        )
        for n, category in enumerate(categories)
    ]
    return _day_axis(title, go.Figure(bars).update_layout(barmode="stack"), len(rows), "findings")


def queue_depth(history: QueueHistory) -> go.Figure:
    """The company's runs waiting in the queue over the last hours, as a step line."""
    title = f"Runs waiting in the queue, last {history.hours} hours"
    if not history.points:
        return _empty(title, "No figures")
    figure = go.Figure(
        go.Scatter(
            x=[p.at for p in history.points],
            y=[p.depth for p in history.points],
            mode="lines",
            line={"shape": "hv", "color": PRIMARY},
            fill="tozeroy",
            hovertemplate="%{x|%H:%M}: %{y} waiting<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        xaxis={"title": "time (UTC)"},
        yaxis={
            "title": "runs",
            "rangemode": "tozero",
            "dtick": 1 if max(p.depth for p in history.points) < 8 else None,
        },
        height=280,
        margin={"l": 50, "r": 20, "t": 50, "b": 50},
    )
    return figure
