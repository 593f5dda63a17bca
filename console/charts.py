"""Chart builders: pure functions from API payloads to plotly figures (testable without a browser)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

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


def kinds(rows: list[dict[str, Any]]) -> list[str]:
    """The kinds of charge in `rows` (each with `by_kind`): runs first, then the platform's, by name."""
    found = {k for r in rows for k in (r.get("by_kind") or {})}
    return sorted(found, key=lambda k: (k != "run", k))


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind.replace("_", " "))


def _bars(rows: list[dict[str, Any]], at: list[str], *, horizontal: bool = False) -> list[go.Bar]:
    """One bar series per kind of charge (runs, chat turns, ...), stacked; a single series without kinds."""
    series = kinds(rows) or [None]
    bars = []
    for n, kind in enumerate(series):
        values = [
            float((r.get("by_kind") or {}).get(kind, 0) if kind else r.get("credits") or 0) for r in rows
        ]
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


def usage_by_day(points: list[dict[str, Any]]) -> go.Figure:
    """Credits charged per day, oldest first, as bars stacked by kind (runs, chat turns, ...)."""
    title = "Credits used per day"
    points = sorted((p for p in points if p.get("day")), key=lambda p: str(p["day"]))
    if not points:
        return _empty(title, "No credits used in this period")
    figure = go.Figure(_bars(points, [str(p["day"])[:10] for p in points]))
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


def usage_by_user(rows: list[dict[str, Any]]) -> go.Figure:
    """Credits per person, largest on top, as horizontal bars stacked by kind (their runs, their chat turns)."""
    title = "Credits used per person"
    rows = sorted(rows, key=lambda r: float(r.get("credits") or 0))
    if not rows:
        return _empty(title, "Nobody has used credits yet")
    figure = go.Figure(_bars(rows, [str(r.get("email") or "?") for r in rows], horizontal=True))
    figure.update_layout(
        title=title,
        barmode="stack",
        xaxis={"title": "credits", "rangemode": "tozero"},
        height=max(240, 60 + 32 * len(rows)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure
