"""Append and verify. Only services call `record`; nothing updates or deletes an entry."""

from __future__ import annotations

import asyncio
import contextvars
import json
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from piccolo.engine.postgres import PostgresEngine
from piccolo.engine.sqlite import SQLiteEngine, TransactionType

from backend.audit import anchor
from backend.audit.tables import AuditEntry
from backend.hashing import sha256_json

GENESIS = "0" * 64
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
# inside `atomic`: the anchor lines waiting for the transaction to commit (None outside it)
_pending: contextvars.ContextVar[list[tuple[int, str]] | None] = contextvars.ContextVar(
    "audit_pending", default=None
)


# the entries that let a run start: a person's approval, the follow-up rule letting one through, or its
# schedule firing it (the schedule a person made stands for the approval). Readers of the trail (the review,
# evidence packs, the soak's invariants) ask this, not their own list.
RUN_APPROVALS = ("run.approved", "run.followup_auto_approved", "schedule.fired")


def run_actor(run_id: int) -> str:
    """How the trail names what a worker did for one run (started it, finished it, charged it)."""
    return f"worker:run-{run_id}"


def host_actor(host_id: str) -> str:
    """How the trail names a fleet host's own doings (registered, left, lost a run)."""
    return f"worker:{host_id}"


def _lock() -> asyncio.Lock:
    """One append at a time per event loop (an asyncio.Lock belongs to the loop it first waited on)."""
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _load(data: Any) -> Any:
    return json.loads(data) if isinstance(data, str) else data


def hashed_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """What an entry's hash covers, as JSON values (the exported lines of backend/audit/export.py are these
    plus the hash, so an offline verifier recomputes it from the line alone)."""
    body = {
        "seq": entry["seq"],
        "at": _utc(entry["at"]),
        "company_id": entry["company_id"],
        "actor": entry["actor"],
        "action": entry["action"],
        "subject_type": entry["subject_type"],
        "subject_id": str(entry["subject_id"]),
        "data": _load(entry["data"]),
        "prev_hash": entry["prev_hash"],
    }
    if entry.get("company_prev_hash") is not None:  # absent on entries older than the company chains
        body["company_prev_hash"] = entry["company_prev_hash"]
    return body


def entry_hash(entry: dict[str, Any]) -> str:
    return sha256_json(hashed_fields(entry))


async def _company_tail(company_id: int | None) -> str | None:
    """The hash this company's next entry links to; None for entries of no company (system)."""
    if company_id is None:
        return None
    last = (
        await AuditEntry.select(AuditEntry.hash)
        .where(AuditEntry.company_id == company_id)
        .order_by(AuditEntry.seq, ascending=False)
        .first()
    )
    return last["hash"] if last else GENESIS


@asynccontextmanager
async def atomic() -> AsyncIterator[None]:
    """A change of state and its audit entries in one transaction: both land or neither does.

    The append lock is taken before the transaction begins, so no other append of this process waits on
    this transaction's write lock while holding the lock this transaction needs. Anchor lines are written
    once the transaction has committed (an entry rolled back is never anchored)."""
    if _pending.get() is not None:
        raise RuntimeError("audit.atomic() does not nest")
    pending: list[tuple[int, str]] = []
    async with _lock():
        token = _pending.set(pending)
        try:
            async with _write_transaction():
                yield
        finally:
            _pending.reset(token)
    for seq, entry_hash in pending:
        await asyncio.to_thread(anchor.append, seq, entry_hash)


def _write_transaction() -> Any:
    """A transaction that writes: on SQLite it takes the write lock at BEGIN (IMMEDIATE, waiting its turn
    with the busy timeout) instead of upgrading a read lock later, which SQLite may refuse at once."""
    engine = AuditEntry._meta.db
    if isinstance(engine, SQLiteEngine):
        return engine.transaction(transaction_type=TransactionType.immediate)
    return engine.transaction()


async def record(
    action: str,
    *,
    actor: str,
    company_id: int | None,
    subject_type: str = "",
    subject_id: Any = "",
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    pending = _pending.get()
    if pending is not None:  # inside `atomic`: its lock is held and its transaction open
        return await _append(action, actor, company_id, subject_type, subject_id, data, pending)
    async with _lock():
        return await _append(action, actor, company_id, subject_type, subject_id, data, None)


async def _append(
    action: str,
    actor: str,
    company_id: int | None,
    subject_type: str,
    subject_id: Any,
    data: dict[str, Any] | None,
    pending: list[tuple[int, str]] | None,
) -> dict[str, Any]:
    """Insert the next entry, taking the next seq again when another process took it; with `pending`,
    inside a transaction (each try in a savepoint, so a lost seq does not abort the transaction) and
    anchored after its commit."""
    engine = AuditEntry._meta.db
    for attempt in range(5):
        last = (
            await AuditEntry.select(AuditEntry.seq, AuditEntry.hash)
            .order_by(AuditEntry.seq, ascending=False)
            .first()
        )
        entry = {
            "seq": (last["seq"] + 1) if last else 1,
            "at": datetime.now(UTC),
            "company_id": company_id,
            "actor": actor,
            "action": action,
            "subject_type": subject_type,
            "subject_id": str(subject_id),
            "data": json.loads(json.dumps(data or {}, default=str)),
            "prev_hash": last["hash"] if last else GENESIS,
            "company_prev_hash": await _company_tail(company_id),
        }
        entry["hash"] = entry_hash(entry)
        savepoint = await engine.current_transaction.get().savepoint() if pending is not None else None
        try:
            await AuditEntry.insert(AuditEntry(**entry))
        except Exception:  # another process took this seq (unique); read the new tail and retry
            if savepoint is not None:
                await savepoint.rollback_to()
            if attempt == 4:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
            continue
        if pending is not None:
            await savepoint.release()
            pending.append((entry["seq"], entry["hash"]))
        else:
            await asyncio.to_thread(anchor.append, entry["seq"], entry["hash"])
        return entry
    raise RuntimeError("unreachable")


@dataclass
class VerifyResult:
    ok: bool
    checked: int
    first_bad_seq: int | None = None
    reason: str | None = None
    head_hash: str | None = None


async def verify() -> VerifyResult:
    """The whole chain (every company's entries: the operator's check, `cleanroom audit verify`), then
    the table against the head anchored outside it, which notices the newest entries being deleted."""
    result = await _verify_chain()
    if not result.ok:
        return result
    table = {r["seq"]: r["hash"] for r in await AuditEntry.select(AuditEntry.seq, AuditEntry.hash)}
    problem = await asyncio.to_thread(anchor.check, table)
    if problem:
        bad_seq, reason = problem
        return VerifyResult(False, result.checked, bad_seq, reason, result.head_hash)
    return result


async def verify_company(company_id: int) -> VerifyResult:
    """One company's own chain, read from its entries alone: each entry's hash, and its link to the
    company's previous entry. What a company admin may run; it says nothing about other companies."""
    expected_prev = GENESIS
    checked = 0
    rows = await AuditEntry.select().where(AuditEntry.company_id == company_id).order_by(AuditEntry.seq)
    for row in rows:
        if entry_hash(row) != row["hash"]:
            return VerifyResult(
                False, checked, row["seq"], "content does not match its hash (the entry was altered)"
            )
        if row["company_prev_hash"] is not None and row["company_prev_hash"] != expected_prev:
            return VerifyResult(
                False,
                checked,
                row["seq"],
                "it does not link to the company's previous entry (an entry before it was deleted or altered)",
            )
        expected_prev = row["hash"]
        checked += 1
    return VerifyResult(True, checked, head_hash=expected_prev if checked else None)


async def _verify_chain() -> VerifyResult:
    expected_prev = GENESIS
    expected_seq = 1
    checked = 0
    rows = await AuditEntry.select().order_by(AuditEntry.id)
    for row in rows:
        if row["seq"] != expected_seq:
            return VerifyResult(
                False,
                checked,
                row["seq"],
                f"expected entry #{expected_seq} here, found #{row['seq']} "
                "(an entry was deleted or the order changed)",
            )
        if row["prev_hash"] != expected_prev:
            return VerifyResult(
                False, checked, row["seq"], "prev_hash does not match the previous entry's hash"
            )
        if entry_hash(row) != row["hash"]:
            return VerifyResult(
                False, checked, row["seq"], "content does not match its hash (the entry was altered)"
            )
        expected_prev = row["hash"]
        expected_seq += 1
        checked += 1
    return VerifyResult(True, checked, head_hash=expected_prev if checked else None)


async def search(
    company_id: int,
    *,
    q: str | None = None,
    action: str | None = None,
    subject_type: str | None = None,
    subject_id: str | None = None,
    actors: list[str] | None = None,
    subjects: dict[str, set[str]] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 200,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """The company's entries, newest first. `actors`: only entries by these (exact names, as `actor`);
    `subjects`: only entries about these subjects (a type and its ids; none at all when empty);
    `since`/`until`: inclusive bounds on `at`."""
    query = AuditEntry.select().where(AuditEntry.company_id == company_id)
    if subjects is not None:
        about = [
            (AuditEntry.subject_type == kind) & AuditEntry.subject_id.is_in(sorted(ids))
            for kind, ids in subjects.items()
            if ids
        ]
        if not about:
            return []
        either = about[0]
        for clause in about[1:]:
            either = either | clause
        query = query.where(either)
    if actors is not None:
        if not actors:
            return []
        query = query.where(AuditEntry.actor.is_in(actors))
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    if until is not None:
        query = query.where(AuditEntry.at <= until)
    if action:
        query = query.where(AuditEntry.action == action)
    if subject_type:
        query = query.where(AuditEntry.subject_type == subject_type)
    if subject_id:
        query = query.where(AuditEntry.subject_id == str(subject_id))
    if q:
        like = f"%{q}%"
        op = (
            "ilike" if isinstance(AuditEntry._meta.db, PostgresEngine) else "like"
        )  # SQLite's LIKE is already case-insensitive for ASCII
        query = query.where(
            getattr(AuditEntry.actor, op)(like)
            | getattr(AuditEntry.action, op)(like)
            | getattr(AuditEntry.subject_id, op)(like)
        )
    rows = await query.order_by(AuditEntry.seq, ascending=False).limit(limit).offset(offset)
    for row in rows:
        row["data"] = _load(row["data"])
    return rows
