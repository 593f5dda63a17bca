"""The audit trail as JSON Lines that verify offline (scripts/verify_audit_export.py, stdlib only), signed.

Line 1 is a header (`"kind": "header"`): the scope (one company's chain, or the whole trail for the operator),
the range asked for, whether values are all there or only those the reader may read, and the chain's
starting point: the entry just before the first exported one (GENESIS at the very beginning), so a range
links to what precedes it. Each following line is one entry, in the form its hash was made with
(service.HASH_FORM; the chain changes form once):

- form 2, a company's export: the company's own number (`company_seq`, never the global seq) and the
  fields its `body_hash` covers, `data_digest` among them, with `hash` being that body hash, which is what
  the company's next entry links to (`company_prev_hash`; no `prev_hash`, another company's hash). When the
  reader may read the entry's subject record (`reveal`), or the entry holds no contents, `data` holds the
  contents too and `salt` is given, so the verifier recomputes the digest; otherwise the contents are left
  out, named in `data_withheld`, and the digest stands for them: the line still verifies.
- form 2, the whole trail (the operator's): also `seq`, `prev_hash` and `body_hash`; `hash` covers those.
- form 1 (entries written before form 2): the fields its hash covers verbatim (global `seq` and `prev_hash`
  among them), plus `company_seq`. Its contents cannot be withheld and the line still check: withheld, the
  line keeps its hash for the links but its content is not recomputable (`data_withheld`).

The last line is a footer (`"kind": "footer"`): how many entries, the head, what checking every exported
entry against the anchor outside the database found (`anchor.problem`, None when each agrees), the sha256
of every byte before the footer, and an Ed25519 signature over the rest of the footer by the key kept
outside the database (backend/audit/signing.py). The verifier refuses the file unless that signature
verifies against a public key given to it.

Entries are read in batches by seq and written as they are read, so an export of any size streams."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from backend.audit import anchor, signing
from backend.audit.service import (
    GENESIS,
    company_link,
    data_digest,
    form,
    hashed_fields,
    split_contents,
)
from backend.audit.tables import AuditEntry
from backend.errors import Invalid
from backend.hashing import canonical_json, sha256_stream

FORMAT = 2
SIGNED = (
    b"cleanroom audit export footer\n"  # what the signature covers: this, then the footer's canonical JSON
)
# the ids of the rows in a batch whose contents the reader may read (None: every row's, the admin's and
# the operator's)
Reveal = Callable[[list[dict[str, Any]]], Awaitable[set[int]]]
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
    """What one export holds, fixed before the first line is written (entries appended meanwhile are not).
    Seqs are global (to read by); `shown` numbers are the scope's own (company_seq in a company's export)."""

    company_id: int | None  # None: the whole trail (the operator's)
    first_seq: int | None  # None with last_seq None: nothing in the range
    last_seq: int | None
    start_shown: int | None  # the number of the entry the range links to (None: the chain's beginning)
    start_hash: str
    since: datetime | None
    until: datetime | None
    first_shown: int | None = None
    last_shown: int | None = None

    @property
    def empty(self) -> bool:
        return self.first_seq is None or self.last_seq is None or self.first_seq > self.last_seq


def _scoped(query: Any, company_id: int | None) -> Any:
    return query.where(AuditEntry.company_id == company_id) if company_id is not None else query


async def _seq(company_id: int | None, *conditions: Any, newest: bool) -> dict[str, Any] | None:
    query = _scoped(
        AuditEntry.select(
            AuditEntry.seq,
            AuditEntry.hash,
            AuditEntry.body_hash,
            AuditEntry.hash_form,
            AuditEntry.company_seq,
        ),
        company_id,
    )
    for condition in conditions:
        query = query.where(condition)
    return await query.order_by(AuditEntry.seq, ascending=not newest).first()


def _shown(row: dict[str, Any], company_id: int | None) -> int:
    return row["company_seq"] if company_id is not None else row["seq"]


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
    link = company_link if company_id is not None else (lambda row: row["hash"])
    return Plan(
        company_id,
        first["seq"],
        last["seq"],
        _shown(before, company_id) if before else None,
        link(before) if before else GENESIS,
        since,
        until,
        _shown(first, company_id),
        _shown(last, company_id),
    )


def _line(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, separators=(",", ":")) + "\n").encode("ascii")


def entry_line(row: dict[str, Any], *, company: bool, shown: bool) -> dict[str, Any]:
    """One entry as its export line (see the module's docstring)."""
    facts, contents = split_contents(row["data"])
    values = shown or not contents
    if form(row) == 1:
        # its hash covers seq and prev_hash, so a form-1 line keeps them, unless its values are withheld:
        # then its hash is kept for the links but cannot be recomputed, and neither is needed
        line = {**hashed_fields(row), "form": 1, "company_seq": row["company_seq"], "hash": row["hash"]}
        if not values:
            hidden = ("seq", "prev_hash") if company else ()
            line = {k: v for k, v in line.items() if k not in hidden}
            line.update(data=facts, data_withheld=sorted(contents))
        return line
    line = {
        "form": 2,
        "company_seq": row["company_seq"],
        "at": hashed_fields(row)["at"],
        "company_id": row["company_id"],
        "actor": row["actor"],
        "action": row["action"],
        "subject_type": row["subject_type"],
        "subject_id": str(row["subject_id"]),
        "data": {**facts, **contents} if values else facts,
        "data_digest": data_digest(row["salt"], contents),
        "company_prev_hash": row["company_prev_hash"],
    }
    if values:
        line["salt"] = row["salt"]
    else:
        line["data_withheld"] = sorted(contents)
    if company:
        return {**line, "hash": row["body_hash"]}
    return {
        **line,
        "seq": row["seq"],
        "prev_hash": row["prev_hash"],
        "body_hash": row["body_hash"],
        "hash": row["hash"],
    }


def signed_footer(footer: dict[str, Any]) -> dict[str, Any]:
    """The footer with the key's fingerprint and its signature over the rest."""
    unsigned = {**footer, "key": {"algorithm": signing.ALGORITHM, "fingerprint": signing.fingerprint()}}
    return {**unsigned, "signature": signing.sign(SIGNED + canonical_json(unsigned))}


async def lines(export: Plan, reveal: Reveal | None = None) -> AsyncIterator[bytes]:
    """The export, one line at a time. `reveal`: which entries' contents the reader may see (None: all)."""
    company = export.company_id is not None
    digest = sha256_stream()

    def out(value: dict[str, Any]) -> bytes:
        line = _line(value)
        digest.update(line)
        return line

    yield out(
        {
            "kind": "header",
            "format": FORMAT,
            "scope": "company" if company else "all",
            "company_id": export.company_id,
            "link": "company_prev_hash" if company else "prev_hash",
            "values": "all" if reveal is None else "readable",
            "from": export.since.isoformat() if export.since else None,
            "to": export.until.isoformat() if export.until else None,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "start": {"seq": export.start_shown, "hash": export.start_hash},
        }
    )
    count, head_shown, head_hash = 0, export.start_shown, export.start_hash
    table: dict[int, str] = {}  # seq -> hash, checked against the anchor
    shown_as: dict[int, int] = {}
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
            readable = None if reveal is None else await reveal(rows)
            for row in rows:
                shown = readable is None or row["id"] in readable
                yield out(entry_line(row, company=company, shown=shown))
                head_shown = _shown(row, export.company_id)
                head_hash = company_link(row) if company else row["hash"]
                table[row["seq"]], shown_as[row["seq"]] = row["hash"], head_shown
                count += 1
            after = rows[-1]["seq"]
    problem, listed = await asyncio.to_thread(functools.partial(anchor.check_counted, table, whole=False))
    yield _line(
        signed_footer(
            {
                "kind": "footer",
                "count": count,
                "head": {"seq": head_shown, "hash": head_hash},
                # every exported entry against the anchor outside the database (None: each agrees)
                "anchor": {
                    "listed": listed,  # the entries the anchor records: each compared with it
                    # the rest are older than the anchor's first line: their hashes and links only
                    "before_anchor": count - listed,
                    "problem": (
                        f"entry #{shown_as[problem[0]]}: {problem[1]}"
                        if problem and problem[0] in shown_as
                        else problem[1]
                        if problem
                        else None
                    ),
                },
                "lines_sha256": digest.hexdigest(),
            }
        )
    )


def filename(export: Plan) -> str:
    scope = "all" if export.company_id is None else f"company-{export.company_id}"
    span = f"{export.first_shown}-{export.last_shown}" if not export.empty else "empty"
    return f"audit-{scope}-{span}.jsonl"
