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


def usage_by_day(points: list[dict[str, Any]]) -> go.Figure:
    """Credits charged per day, oldest first, as bars."""
    title = "Credits used per day"
    points = sorted((p for p in points if p.get("day")), key=lambda p: str(p["day"]))
    if not points:
        return _empty(title, "No credits used in this period")
    figure = go.Figure(
        go.Bar(
            x=[str(p["day"])[:10] for p in points],
            y=[float(p.get("credits") or 0) for p in points],
            marker_color=PRIMARY,
            hovertemplate="%{x}: %{y} credits<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        xaxis={"title": "day", "type": "category"},
        yaxis={"title": "credits", "rangemode": "tozero"},
        bargap=0.6 if len(points) < 4 else 0.2,
        height=320,
        margin={"l": 50, "r": 20, "t": 50, "b": 50},
    )
    return figure


def usage_by_user(rows: list[dict[str, Any]]) -> go.Figure:
    """Credits per person, largest on top, as horizontal bars."""
    title = "Credits used per person"
    rows = sorted(rows, key=lambda r: float(r.get("credits") or 0))
    if not rows:
        return _empty(title, "Nobody has used credits yet")
    figure = go.Figure(
        go.Bar(
            x=[float(r.get("credits") or 0) for r in rows],
            y=[str(r.get("email") or "?") for r in rows],
            orientation="h",
            marker_color=ACCENT,
            hovertemplate="%{y}: %{x} credits<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        xaxis={"title": "credits", "rangemode": "tozero"},
        height=max(240, 60 + 32 * len(rows)),
        margin={"l": 160, "r": 20, "t": 50, "b": 50},
    )
    return figure
