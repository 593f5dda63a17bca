"""Append and verify. Only services call `record`; nothing updates or deletes an entry."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import secrets
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from piccolo.engine.postgres import PostgresEngine
from piccolo.engine.sqlite import SQLiteEngine, TransactionType

from backend import locks
from backend.audit import anchor
from backend.audit.schemas import CONTENT_KEYS
from backend.audit.tables import AuditEntry
from backend.hashing import salted_digest, sha256_json

log = logging.getLogger("cleanroom.audit")
GENESIS = "0" * 64
HASH_FORM = 2  # what every new entry is hashed with (form 1: `data` verbatim; see tables.AuditEntry)
CHAIN_LOCK = locks.CHAIN  # the row of `api_lock` (PostgreSQL) appends of all API processes take in turn
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


@dataclass
class _Atomic:
    """Inside `atomic`: the entries recorded so far, anchored once the transaction has committed. `deferred`
    (PostgreSQL): they are inserted at the end, just before the commit (`record` returned their fields, and
    their seq and hash are filled in then)."""

    deferred: bool
    entries: list[dict[str, Any]] = field(default_factory=list)


_pending: contextvars.ContextVar[_Atomic | None] = contextvars.ContextVar("audit_pending", default=None)


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


class _Batched:
    """Work of one event loop done in batches: what callers hand in while a batch is being done goes
    together into the next. `work` takes the items in arrival order and returns one result per item; when
    it raises, every caller of that batch gets the exception; an Exception in place of a result is that one
    caller's."""

    def __init__(self, work: Callable[[list[Any]], Awaitable[list[Any]]]) -> None:
        self.work = work
        self.waiting: list[tuple[Any, asyncio.Future[Any]]] = []
        self.running: asyncio.Task[None] | None = None

    async def __call__(self, item: Any) -> Any:
        done = asyncio.get_running_loop().create_future()
        self.waiting.append((item, done))
        if self.running is None or self.running.done():
            # in a context of its own: not inside whatever transaction the caller that started it was in
            loop = asyncio.get_running_loop()
            self.running = loop.create_task(self._drain(), context=contextvars.Context())
        return await asyncio.shield(done)  # a caller that gives up does not take the others' items with it

    async def _drain(self) -> None:
        while self.waiting:
            batch, self.waiting = self.waiting[:BATCH], self.waiting[BATCH:]
            try:
                results = await self.work([item for item, _ in batch])
            except BaseException as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                        done.exception()  # retrieved here too: a caller that gave up leaves no warning
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, done), result in zip(batch, results, strict=True):
                if done.done():
                    continue
                if isinstance(result, Exception):  # this item alone failed
                    done.set_exception(result)
                    done.exception()
                else:
                    done.set_result(result)


BATCH = 200  # entries at most in one insert, lines in one write
_ANCHOR_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-anchor")
_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Batched]] = (
    weakref.WeakKeyDictionary()
)


def _batched(name: str, work: Callable[[list[Any]], Awaitable[list[Any]]]) -> _Batched:
    per_loop = _batchers.setdefault(asyncio.get_running_loop(), {})
    if name not in per_loop:
        per_loop[name] = _Batched(work)
    return per_loop[name]


async def _write_anchors(lines: list[tuple[int, str]]) -> list[None]:
    """Anchor lines, written by one thread of their own (never queued behind staging's scans in the
    default executor), one fsync for all."""
    await asyncio.get_running_loop().run_in_executor(_ANCHOR_THREAD, anchor.append_many, lines)
    return [None] * len(lines)


async def _anchor(lines: list[tuple[int, str]]) -> None:
    """On disk before returning; lines that wait while another write is on disk go together in the next."""
    batcher = _batched("anchor", _write_anchors)
    await asyncio.gather(*(batcher(line) for line in lines))


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
    """What a form-1 entry's hash covers, as JSON values (a form-1 line of an export is these plus the hash,
    so an offline verifier recomputes it from the line alone)."""
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


def form(entry: dict[str, Any]) -> int:
    return int(entry.get("hash_form") or 1)


def split_contents(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """An entry's `data` as (its facts, its contents): the values of CONTENT_KEYS (records' and outputs'
    values), which a form-2 hash covers only as a salted digest."""
    data = _load(data)
    if not isinstance(data, dict):
        return {}, {}
    return (
        {k: v for k, v in data.items() if k not in CONTENT_KEYS},
        {k: data[k] for k in CONTENT_KEYS if k in data},
    )


def data_digest(salt: str, contents: dict[str, Any]) -> str:
    """sha256(salt || canonical contents); `salt` is the entry's, hex."""
    return salted_digest(bytes.fromhex(salt), contents)


def body_fields(entry: dict[str, Any], digest: str | None = None) -> dict[str, Any]:
    """What a form-2 entry's `body_hash` covers: its own facts, its contents as a digest (computed from the
    entry's `data` and `salt` unless given) and its company link; no global seq, no other company's hash."""
    facts, contents = split_contents(entry["data"])
    return {
        "form": 2,
        "company_id": entry["company_id"],
        "company_seq": entry["company_seq"],
        "at": _utc(entry["at"]),
        "actor": entry["actor"],
        "action": entry["action"],
        "subject_type": entry["subject_type"],
        "subject_id": str(entry["subject_id"]),
        "data": facts,
        "data_digest": digest if digest is not None else data_digest(entry["salt"], contents),
        "company_prev_hash": entry["company_prev_hash"],
    }


def body_hash(entry: dict[str, Any]) -> str:
    return sha256_json(body_fields(entry))


def chain_fields(entry: dict[str, Any], body: str) -> dict[str, Any]:
    """What a form-2 entry's (global) `hash` covers: its place in the whole trail and its body's hash."""
    return {"form": 2, "seq": entry["seq"], "prev_hash": entry["prev_hash"], "body_hash": body}


def entry_hash(entry: dict[str, Any]) -> str:
    """The entry's hash by the formula of its own form."""
    if form(entry) == 1:
        return sha256_json(hashed_fields(entry))
    return sha256_json(chain_fields(entry, body_hash(entry)))


def company_link(entry: dict[str, Any]) -> str:
    """What the company's next entry links to (`company_prev_hash`) and a company's view calls this entry's
    hash: a form-2 entry's body hash (no global field in it), a form-1 entry's hash."""
    return entry["body_hash"] if form(entry) >= 2 else entry["hash"]


def entry_problem(entry: dict[str, Any]) -> str | None:
    """Why an entry's stored hashes are not its content's, or None."""
    if form(entry) not in (1, 2):
        return f"unknown hash form {entry.get('hash_form')!r}"
    if form(entry) == 2 and (not entry.get("salt") or entry.get("body_hash") != body_hash(entry)):
        return "content does not match its hash (the entry was altered)"
    if entry_hash(entry) != entry["hash"]:
        return "content does not match its hash (the entry was altered)"
    return None


async def _tails(company_ids: list[int | None]) -> tuple[int, str, dict[int, tuple[str, int]]]:
    """The next entry's seq, the hash it links to, and for each company what its chain links to and its
    last company_seq ((GENESIS, 0) before a company's first entry): read in one round trip, under the
    append lock."""
    companies = sorted({c for c in company_ids if c is not None})
    last = 'FROM "audit_entry" ORDER BY "seq" DESC LIMIT 1'
    columns = [f'(SELECT "seq" {last}) AS "seq"', f'(SELECT "hash" {last}) AS "hash"']
    mine = 'FROM "audit_entry" WHERE "company_id" = {} ORDER BY "seq" DESC LIMIT 1'
    for k in range(len(companies)):
        columns.append(f'(SELECT COALESCE("body_hash", "hash") {mine}) AS "c{k}"')
        columns.append(f'(SELECT "company_seq" {mine}) AS "n{k}"')
    rows = await AuditEntry.raw("SELECT " + ", ".join(columns), *(c for c in companies for _ in (0, 1)))
    row = rows[0] if rows else {}
    seq = int(row.get("seq") or 0)
    tails = {c: (row.get(f"c{k}") or GENESIS, int(row.get(f"n{k}") or 0)) for k, c in enumerate(companies)}
    return seq + 1, (row.get("hash") or GENESIS) if seq else GENESIS, tails


@asynccontextmanager
async def atomic() -> AsyncIterator[None]:
    """A change of state and its audit entries in one transaction: both land or neither does. Anchor lines
    are written once the transaction has committed (an entry rolled back is never anchored).

    On PostgreSQL the entries are inserted at the end of the transaction, the append lock held only for
    those inserts and the commit: the chain's tail is what every append waits on, so it is held for the
    shortest time (the whole transaction under the lock made every result, charge and approval of the
    process wait in one line, about 14 ms each with 36 runs a second ending). Holding the lock, the
    transaction takes no lock but the audit table's, so no append holding it ever waits on this one.
    On SQLite, and inside a transaction of the caller's own, the lock is taken before the transaction
    begins (BEGIN IMMEDIATE takes SQLite's one write lock; an append holding our lock would wait on it)."""
    if _pending.get() is not None:
        raise RuntimeError("audit.atomic() does not nest")
    engine = AuditEntry._meta.db
    if isinstance(engine, PostgresEngine) and engine.current_transaction.get() is None:
        state = _Atomic(deferred=True)
        token = _pending.set(state)
        try:
            async with engine.transaction() as transaction:
                yield
                if state.entries:
                    async with _lock():
                        appended = await _append(state.entries, in_transaction=True, chain_lock=True)
                        await transaction.commit()
                    for fields, entry in zip(state.entries, appended, strict=True):
                        fields.update(entry)
        finally:
            _pending.reset(token)
    else:
        state = _Atomic(deferred=False)
        async with _lock():
            token = _pending.set(state)
            try:
                async with _write_transaction():
                    yield
            finally:
                _pending.reset(token)
    await _anchor([(entry["seq"], entry["hash"]) for entry in state.entries])


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
    """Append one entry. Inside `atomic` it joins that transaction, anchored after the commit (on PostgreSQL
    it is inserted at the transaction's end: the dict returned gets its seq and hash then); inside a
    transaction of the caller's own it joins that one, as it always did. Otherwise entries recorded at the
    same moment are inserted together, in arrival order, in one transaction (one commit for
    many, the lock taken once), and each is anchored before `record` returns."""
    fields = {
        "action": action,
        "actor": actor,
        "company_id": company_id,
        "subject_type": subject_type,
        "subject_id": str(subject_id),
        "data": json.loads(json.dumps(data or {}, default=str)),
    }
    pending = _pending.get()
    if pending is not None:
        if pending.deferred:  # inserted with the others at the end of the transaction, seq and hash then
            pending.entries.append(fields)
            return fields
        (entry,) = await _append([fields], in_transaction=True)
        pending.entries.append(entry)
        return entry
    if AuditEntry._meta.db.current_transaction.get() is not None:  # the caller's own transaction: joined
        async with _lock():
            (entry,) = await _append([fields], in_transaction=True)
    else:
        entry = await _batched("record", _append_committed)(fields)
    await _anchor([(entry["seq"], entry["hash"])])
    return entry


async def _append_committed(batch: list[dict[str, Any]]) -> list[dict[str, Any] | Exception]:
    """The batch in one transaction; when it fails, each entry in one of its own, so an entry the database
    refuses (a value too long for its column) fails its own caller only. On PostgreSQL the transaction's
    connection is taken before the lock, and the lock held until the commit: the lock's holder never waits
    for the pool, whose connections transactions waiting for the lock may hold (`atomic`)."""
    if not isinstance(AuditEntry._meta.db, PostgresEngine):
        async with _lock():
            return await _each_if_refused(batch, lambda part: _append(part, in_transaction=False))
    return await _each_if_refused(batch, _commit_chained)


async def _each_if_refused(
    batch: list[dict[str, Any]], append: Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]
) -> list[dict[str, Any] | Exception]:
    """`append` of the whole batch; when that fails, of each entry on its own: one result or exception each."""
    try:
        return list(await append(batch))
    except Exception:
        if len(batch) == 1:
            raise
    results: list[dict[str, Any] | Exception] = []
    for fields in batch:
        try:
            results += await append([fields])
        except Exception as exc:
            results.append(exc)
    return results


async def _commit_chained(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PostgreSQL: `batch` appended and committed in a transaction of its own, under the chain's lock."""
    async with AuditEntry._meta.db.transaction() as transaction, _lock():
        entries = await _append(batch, in_transaction=True, chain_lock=True)
        await transaction.commit()
    return entries


async def _take_chain_lock() -> None:
    """The chain's lock, held to the commit of this transaction, which follows at once: the appends of the
    other API processes wait here instead of taking the same seq and retrying. A row of `api_lock`, which no
    worker host's database role can see (an advisory key any role could hold: issue 52, D-M1)."""
    if not await AuditEntry.raw(locks.ROW_LOCK, CHAIN_LOCK):
        raise locks.missing(CHAIN_LOCK)


def _chained(
    batch: list[dict[str, Any]], seq: int, prev_hash: str, tails: dict[int, tuple[str, int]]
) -> list[dict[str, Any]]:
    """The batch's entries, in order, hashed in the current form, each linked to the one before it and to
    its company's last, and numbered in its company."""
    entries = []
    for fields in batch:
        entry = {**fields, "seq": seq, "at": datetime.now(UTC), "prev_hash": prev_hash}
        company = fields["company_id"]
        link, number = (None, None) if company is None else (tails[company][0], tails[company][1] + 1)
        entry.update(
            company_prev_hash=link, company_seq=number, hash_form=HASH_FORM, salt=secrets.token_hex(16)
        )
        entry["body_hash"] = body_hash(entry)
        entry["hash"] = sha256_json(chain_fields(entry, entry["body_hash"]))
        entries.append(entry)
        seq, prev_hash = seq + 1, entry["hash"]
        if company is not None:
            tails[company] = (entry["body_hash"], number)
    return entries


async def _append(
    batch: list[dict[str, Any]], *, in_transaction: bool, chain_lock: bool = False
) -> list[dict[str, Any]]:
    """Insert the next entries, chained in order: inside the caller's transaction, or in one transaction of
    their own.

    `chain_lock` (PostgreSQL, in a transaction that commits right after): the chain's lock first.
    Every PostgreSQL append but one inside a caller's own transaction takes it, so while it is held nobody
    else reads the tail, and the insert is tried once: no savepoint around it. Those two statements were a
    third of what an append held the chain for, the one lock every audited write of every process waits on
    (docs/scale.md, item 14). An append inside a caller's own transaction takes no chain lock (it would hold
    it to that caller's commit, through whatever the caller does next). Should it take the seq this
    one read, this insert fails and its transaction with it, instead of the trail forking; no code of the
    product records an entry in a transaction of its own on PostgreSQL.

    Otherwise each try is in a savepoint (inside the caller's transaction, so a lost seq does not abort it)
    and a seq another writer took is read again and tried again."""
    engine = AuditEntry._meta.db
    if chain_lock:
        await _take_chain_lock()
        entries = _chained(batch, *(await _tails([f["company_id"] for f in batch])))
        await AuditEntry.insert(*(AuditEntry(**e) for e in entries))
        return entries
    for attempt in range(5):
        entries = _chained(batch, *(await _tails([f["company_id"] for f in batch])))
        savepoint = await engine.current_transaction.get().savepoint() if in_transaction else None
        try:
            if in_transaction:
                await AuditEntry.insert(*(AuditEntry(**e) for e in entries))
            else:
                async with _write_transaction():
                    await AuditEntry.insert(*(AuditEntry(**e) for e in entries))
        except Exception:  # another writer took these seqs (unique); read the new tails and retry
            if savepoint is not None:
                await savepoint.rollback_to()
            if attempt == 4:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
            continue
        if savepoint is not None:
            await savepoint.release()
        return entries
    raise RuntimeError("unreachable")


@dataclass
class VerifyResult:
    ok: bool
    checked: int
    first_bad_seq: int | None = None
    reason: str | None = None
    head_hash: str | None = None
    behind: anchor.Behind | None = None  # not ok, and not tampering: a restored backup, not yet recorded


async def verify() -> VerifyResult:
    """The whole chain (every company's entries: the operator's check, `cleanroom audit verify`), then
    the table against the anchor outside it, which notices the newest entries being deleted, an entry
    rewritten, and one inserted among anchored ones. Its outcome is kept beside the anchor (/metrics)."""
    result = await _verify_whole()
    await asyncio.to_thread(anchor.record_verified, result.ok, result.checked, result.reason)  # for /metrics
    return result


async def _verify_whole() -> VerifyResult:
    result = await _verify_chain()
    if not result.ok:
        return result
    table = {r["seq"]: r["hash"] for r in await AuditEntry.select(AuditEntry.seq, AuditEntry.hash)}
    problem = await asyncio.to_thread(anchor.check, table)
    if problem:
        bad_seq, reason = problem
        restored = await asyncio.to_thread(anchor.behind, table)
        if restored is not None:
            reason = restored.describe()
        return VerifyResult(False, result.checked, bad_seq, reason, result.head_hash, behind=restored)
    return result


async def head() -> tuple[int, str | None]:
    """The trail's newest entry: (seq, hash), (0, None) when empty."""
    row = (
        await AuditEntry.select(AuditEntry.seq, AuditEntry.hash)
        .order_by(AuditEntry.seq, ascending=False)
        .first()
    )
    return (row["seq"], row["hash"]) if row else (0, None)


async def start_problem(*, new_anchor: bool = False) -> str | None:
    """`anchor.start_problem` for this database; with `new_anchor`, a missing anchor is started instead (and
    a database behind its anchor is still refused)."""
    seq, entry_hash = await head()
    problem = await asyncio.to_thread(anchor.start_problem, seq, entry_hash)
    if problem is not None and new_anchor and not anchor.path().exists():
        target = await asyncio.to_thread(anchor.start_new, seq, entry_hash)
        log.warning(
            "started a new audit anchor at entry #%s for %s: %s", seq, anchor.database_identity(), target
        )
        return None
    return problem


async def verify_company(company_id: int) -> VerifyResult:
    """One company's own chain, read from its entries alone: each entry's hash, its link to the company's
    previous entry, its company_seq following the one before, and every entry against the anchor outside
    the database (an entry rewritten, or inserted among anchored ones, fails, not only a changed head). What
    a company admin or auditor may run; it says nothing about other companies: `first_bad_seq` is the
    company's own number (company_seq), and the head is the company's link hash."""
    rows = await AuditEntry.select().where(AuditEntry.company_id == company_id).order_by(AuditEntry.seq)
    result = company_chain(rows)
    if not result.ok:
        return result
    table = {row["seq"]: row["hash"] for row in rows}
    problem = await asyncio.to_thread(functools.partial(anchor.check, table, whole=False))
    if problem:
        bad = next((row for row in rows if row["seq"] == problem[0]), None)  # None: the anchor file's own
        number = bad["company_seq"] if bad is not None else None
        return VerifyResult(False, result.checked, number, problem[1], result.head_hash)
    return result


def company_chain(rows: list[dict[str, Any]]) -> VerifyResult:
    """A company's entries (oldest first) checked on their own: hashes, links, company_seq."""
    expected_prev, expected_number, checked, seen_form2 = GENESIS, 1, 0, False
    for row in rows:
        number = row.get("company_seq")
        problem = entry_problem(row)
        if problem is None and form(row) == 1 and seen_form2:
            problem = "a form-1 entry after form 2 (the chain changes form once)"
        if problem is None and form(row) == 2 and row["company_prev_hash"] is None:
            problem = "it names no previous company entry"
        if (
            problem is None
            and row["company_prev_hash"] is not None
            and row["company_prev_hash"] != expected_prev
        ):
            problem = (
                "it does not link to the company's previous entry (an entry before it was deleted or altered)"
            )
        if (
            problem is None
            and number is not None
            and expected_number is not None
            and number != expected_number
        ):
            problem = f"expected the company's entry #{expected_number} here (an entry was deleted or moved)"
        if problem:
            return VerifyResult(False, checked, number, problem)
        seen_form2 = seen_form2 or form(row) == 2
        expected_prev = company_link(row)
        expected_number = None if number is None else number + 1
        checked += 1
    return VerifyResult(True, checked, head_hash=expected_prev if checked else None)


async def _verify_chain() -> VerifyResult:
    expected_prev = GENESIS
    expected_seq = 1
    checked = 0
    seen_form2 = False
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
        problem = entry_problem(row)
        if problem is None and form(row) == 1 and seen_form2:
            problem = "a form-1 entry after form 2 (the chain changes form once)"
        if problem:
            return VerifyResult(False, checked, row["seq"], problem)
        seen_form2 = seen_form2 or form(row) == 2
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
