"""What the approval screen receives: one finding per suspicious cell, line, header or sheet name."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

Severity = Literal["high", "medium", "low"]
TIERS = {
    1: "scanner",
    2: "semantic scorer",
    3: "full encoder",
}  # Finding.tier, as the approval screen names it


class Acknowledgement(BaseModel):
    """An admin marked this cell's finding "expected here" (backend/injection/acknowledge.py): it is still
    shown, as acknowledged; it lapses when the cell changes (another hash)."""

    id: int
    by: str
    at: datetime
    reason: str


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
    # which tier found it (1 the scanner, 2 the semantic scorer, 3 the full encoder: TIERS), the reason as
    # codes that backend/injection/reasons.py renders in the reader's language, the sha256 of the text judged
    # (the cell, the line, or the cells read together; what an acknowledgement is keyed by), and the
    # acknowledgement that holds for it, filled in when a run is read.
    tier: int = 1
    reason_codes: list[str] = []
    cell_sha256: str | None = None
    acknowledged: Acknowledgement | None = None
