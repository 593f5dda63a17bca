"""What the approval screen receives: one finding per suspicious cell, line, header or sheet name."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Severity = Literal["high", "medium", "low"]


class Finding(BaseModel):
    path: str
    sheet: str | None = None
    row: int | None = None
    column: str | None = None
    severity: Severity
    category: str
    excerpt: str
    # Added to the `cleanroom scan --json` contract (the fields above are unchanged): a one-line reason, and
    # the [start, end) character offsets, in the cell or line, of the part that scored.
    reason: str | None = None
    span: tuple[int, int] | None = None
