"""The audit trail as JSON Lines that verify offline (scripts/verify_audit_export.py, stdlib only).

Line 1 is a header (`"kind": "header"`): the scope (one company's chain, or the whole trail for the operator),
the range asked for, and the chain's starting point: the hash of the entry just before the first exported
one (GENESIS at the very beginning), so a range links to what precedes it. Each following line is one
entry: exactly the fields its hash covers (`service.hashed_fields`) plus `hash`. The last line is a footer
(`"kind": "footer"`): how many entries, the head (the last entry's seq and hash) and the anchor, the hash the
data directory's anchor file recorded for that seq. The verifier recomputes every hash, follows every link
(`company_prev_hash` for a company, `prev_hash` and consecutive seqs for the whole trail), and compares the
head with the footer and the anchor; a missing footer is a truncated file.

Entries are read in batches by seq and written as they are read, so an export of any size streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from backend.audit import anchor
from backend.audit.service import GENESIS, hashed_fields
from backend.audit.tables import AuditEntry
from backend.errors import Invalid

FORMAT = 1
BATCH = 500
MEDIA_TYPE = "application/jsonl"


def parse_bound(value: str | None, *, end: bool) -> datetime | None:
    """An ISO 8601 date or date-time (no zone: UTC). A date alone as `to` means through the end of that day."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            at = datetime.combine(day + timedelta(days=1) if end else day, time.min, tzinfo=UTC)
            return at - timedelta(microseconds=1) if end else at
        at = datetime.fromisoformat(text)
    except ValueError:
        raise Invalid(
            f"not an ISO 8601 date or date-time: {value!r} (e.g. 2026-03-03 or 2026-03-03T09:00:00Z)"
        ) from None
    return at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)


@dataclass
class Plan:
    """What one export holds, fixed before the first line is written (entries appended meanwhile are not)."""

    company_id: int | None  # None: the whole trail (the operator's)
    first_seq: int | None  # None with last_seq None: nothing in the range
    last_seq: int | None
    start_seq: int | None  # the entry the range links to (None: the chain's beginning)
    start_hash: str
    since: datetime | None
    until: datetime | None

    @property
    def empty(self) -> bool:
        return self.first_seq is None or self.last_seq is None or self.first_seq > self.last_seq


def _scoped(query: Any, company_id: int | None) -> Any:
    return query.where(AuditEntry.company_id == company_id) if company_id is not None else query


async def _seq(company_id: int | None, *conditions: Any, newest: bool) -> dict[str, Any] | None:
    query = _scoped(AuditEntry.select(AuditEntry.seq, AuditEntry.hash), company_id)
    for condition in conditions:
        query = query.where(condition)
    return await query.order_by(AuditEntry.seq, ascending=not newest).first()


async def plan(company_id: int | None, since: datetime | None = None, until: datetime | None = None) -> Plan:
    """The contiguous run of the scope's entries from the first at or after `since` to the last at or before
    `until` (by seq, so the exported chain has no holes even where clocks disagreed)."""
    if since is not None and until is not None and since > until:
        raise Invalid("`from` is after `to`")
    first = await _seq(company_id, *([AuditEntry.at >= since] if since else []), newest=False)
    last = await _seq(company_id, *([AuditEntry.at <= until] if until else []), newest=True)
    if first is None or last is None or first["seq"] > last["seq"]:
        return Plan(company_id, None, None, None, GENESIS, since, until)
    before = await _seq(company_id, AuditEntry.seq < first["seq"], newest=True)
    return Plan(
        company_id,
        first["seq"],
        last["seq"],
        before["seq"] if before else None,
        before["hash"] if before else GENESIS,
        since,
        until,
    )


def _anchored(seq: int) -> str | None:
    """The anchor file's hash for `seq`, read line by line (a later line for a seq wins, as in anchor.read)."""
    found = None
    target = anchor.path()
    if not target.exists():
        return None
    prefix = f"{seq} "
    with open(target, encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith(prefix):
                entry_hash = line.strip().partition(" ")[2]
                if len(entry_hash) == 64:
                    found = entry_hash
    return found


def _line(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, separators=(",", ":")) + "\n").encode("ascii")


async def lines(export: Plan) -> AsyncIterator[bytes]:
    """The export, one line at a time."""
    yield _line(
        {
            "kind": "header",
            "format": FORMAT,
            "scope": "all" if export.company_id is None else "company",
            "company_id": export.company_id,
            "link": "prev_hash" if export.company_id is None else "company_prev_hash",
            "from": export.since.isoformat() if export.since else None,
            "to": export.until.isoformat() if export.until else None,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "start": {"seq": export.start_seq, "hash": export.start_hash},
        }
    )
    count, head_seq, head_hash = 0, export.start_seq, export.start_hash
    if not export.empty:
        after = export.first_seq - 1  # type: ignore[operator]
        while True:
            rows = (
                await _scoped(AuditEntry.select(), export.company_id)
                .where(AuditEntry.seq > after)
                .where(AuditEntry.seq <= export.last_seq)
                .order_by(AuditEntry.seq)
                .limit(BATCH)
            )
            if not rows:
                break
            for row in rows:
                yield _line({**hashed_fields(row), "hash": row["hash"]})
                count, head_seq, head_hash = count + 1, row["seq"], row["hash"]
            after = rows[-1]["seq"]
    anchored = await asyncio.to_thread(_anchored, head_seq) if head_seq is not None else None
    yield _line(
        {
            "kind": "footer",
            "count": count,
            "head": {"seq": head_seq, "hash": head_hash},
            # what the anchor file outside the database says the head entry's hash is (None: not anchored)
            "anchor": {"seq": head_seq, "hash": anchored} if anchored else None,
        }
    )


def filename(export: Plan) -> str:
    scope = "all" if export.company_id is None else f"company-{export.company_id}"
    span = f"{export.first_seq}-{export.last_seq}" if not export.empty else "empty"
    return f"audit-{scope}-{span}.jsonl"
