"""The verdict cache in the database (issue 55): per company, by (cell sha256, scanner fingerprint).

Keyed per company, not shared: a verdict under another company's hash says nothing of its text, but a hit
is faster than a scan, so a shared cache would let one company time whether another staged a given cell
(a salary, a name). Per company, a cell repeated across companies is judged once per company; the cost is
one row of about 200-400 bytes per distinct prose cell (figures: backend/injection/README.md).

Bounded growth: a verdict is read for RETENTION_DAYS after it was stored (then judged and stored again);
`prune` (after a scan's first store) deletes a company's verdicts older than that or of another fingerprint (a
previous model or scanner), then the oldest beyond MAX_PER_COMPANY.

The scanner runs in a worker thread (asyncio.to_thread) and is synchronous; `DbVerdictCache` answers it by
running the queries on the event loop that created it and waiting for them (the loop is free: it awaits the
thread). Used from the loop's own thread it would wait on itself, so there it caches nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from datetime import timedelta
from typing import Any, cast

from piccolo.querystring import QueryString

from backend import clock
from backend.injection import verdicts
from backend.staging.tables import InjectionVerdict

RETENTION_DAYS = 30
MAX_PER_COMPANY = 200_000  # distinct prose cells: at 5,000 rows × 3 datasets a proposal, many weeks of runs
CHUNK = 4000  # bound parameters per statement (SQLite allows 32,766, PostgreSQL 32,767)
LOOKUP_CHUNK = 50_000  # hashes written into one SELECT (3.4 MB of SQL at most)
log = logging.getLogger(__name__)


def _run(sql: str, *args: Any) -> Any:
    """One statement through the table's engine (SQLite or PostgreSQL; the SQL is the same on both): the
    cache reads and writes thousands of rows a proposal, where building a Piccolo object per row cost more
    than the scan it saves."""
    return InjectionVerdict._meta.db.run_querystring(QueryString(sql, *args))


HEX64 = re.compile(r"[0-9a-f]{64}")


def _encode(verdict: dict[str, Any]) -> str:
    """As stored: a verdict without findings (nearly all) as its probability's repr, else JSON."""
    return repr(float(verdict["p"])) if not verdict["h"] else verdicts.dumps(verdict)


def _decode(text: str) -> dict[str, Any]:
    return json.loads(text) if text.startswith("{") else {"p": float(text), "h": []}


async def lookup(company_id: int, fingerprint: str, hashes: list[str]) -> dict[str, dict[str, Any]]:
    """The stored verdicts of `hashes` (lower-case sha256 hex: anything else is refused, since they are
    written into the statement; binding 20,000 parameters cost Piccolo more than the query)."""
    bad = [h for h in hashes if not HEX64.fullmatch(h)]
    if bad:
        raise ValueError(f"not a sha256: {bad[0]!r}")
    cutoff = clock.now() - timedelta(days=RETENTION_DAYS)
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(hashes), LOOKUP_CHUNK):
        listed = ",".join(f"'{h}'" for h in hashes[i : i + LOOKUP_CHUNK])
        rows = await _run(
            'SELECT "cell_sha256", "verdict" FROM "injection_verdict" WHERE "company" = {} AND "fingerprint" = {} '
            f'AND "stored_at" >= {{}} AND "cell_sha256" IN ({listed})',
            company_id,
            fingerprint,
            cutoff,
        )
        for row in rows:
            out[row["cell_sha256"]] = _decode(row["verdict"])
    return out


async def store(company_id: int, fingerprint: str, found: dict[str, dict[str, Any]]) -> None:
    """Insert new verdicts; one already there (a concurrent scan of the same cell, an expired one) is
    replaced."""
    if not found:
        return
    now = clock.now()
    items = list(found.items())
    per = CHUNK // 5
    for i in range(0, len(items), per):
        part = items[i : i + per]
        args: list[Any] = []
        for digest, verdict in part:
            args += [company_id, digest, fingerprint, _encode(verdict), now]
        await _run(
            'INSERT INTO "injection_verdict" ("company", "cell_sha256", "fingerprint", "verdict", "stored_at") '
            f"VALUES {', '.join(['({}, {}, {}, {}, {})'] * len(part))} "
            'ON CONFLICT ("company", "cell_sha256", "fingerprint") '
            'DO UPDATE SET "verdict" = excluded."verdict", "stored_at" = excluded."stored_at"',
            *args,
        )


async def prune(company_id: int, fingerprint: str) -> int:
    """Delete a company's verdicts past RETENTION_DAYS or of another fingerprint, then the oldest beyond
    MAX_PER_COMPANY. Returns how many rows are left."""
    t = InjectionVerdict
    cutoff = clock.now() - timedelta(days=RETENTION_DAYS)
    await t.delete().where(
        (t.company == company_id) & ((t.stored_at < cutoff) | (t.fingerprint != fingerprint))
    )
    left = cast(int, await t.count().where(t.company == company_id))
    if left > MAX_PER_COMPANY:
        edge = (
            await t.select(t.stored_at)
            .where(t.company == company_id)
            .order_by(t.stored_at, ascending=False)
            .offset(MAX_PER_COMPANY)
            .first()
        )
        if edge is not None:
            await t.delete().where((t.company == company_id) & (t.stored_at <= edge["stored_at"]))
        left = cast(int, await t.count().where(t.company == company_id))
    return left


class DbVerdictCache:
    """verdicts.VerdictCache over the database, for one company and the current fingerprint."""

    def __init__(self, company_id: int, fingerprint: str | None = None) -> None:
        self.company_id = company_id
        self.fingerprint = fingerprint or verdicts.fingerprint()
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.pruned = False

    def _wait(self, coro: Any) -> Any:
        if threading.get_ident() == self.thread:
            coro.close()
            return None  # on the loop's own thread: waiting would block the loop that must answer
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def get(self, hashes: list[str]) -> dict[str, dict[str, Any]]:
        return self._wait(lookup(self.company_id, self.fingerprint, hashes)) or {}

    def put(self, found: dict[str, dict[str, Any]]) -> None:
        try:
            self._wait(store(self.company_id, self.fingerprint, found))
            if not self.pruned:  # once per scan (a proposal, a run's outputs), after its first store
                self.pruned = True
                self._wait(prune(self.company_id, self.fingerprint))
        except Exception:  # noqa: BLE001 - a cache that cannot store costs a re-scan next time, nothing more
            log.exception("storing %d injection verdicts failed", len(found))
