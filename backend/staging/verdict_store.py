"""The verdict cache in the database (issue 55): per company, by (cell sha256, scanner fingerprint).

Keyed per company, not shared: a verdict under another company's hash says nothing of its text, but a hit
is faster than a scan, so a shared cache would let one company time whether another staged a given cell
(a salary, a name). Per company, a cell repeated across companies is judged once per company; the cost is
one row of about 200-400 bytes per distinct prose cell (figures: backend/injection/README.md).

Bounded growth: a verdict is read for RETENTION_DAYS after it was stored (then judged and stored again);
`prune` (after each store) deletes a company's verdicts older than that or of another fingerprint (a
previous model or scanner), then the oldest beyond MAX_PER_COMPANY.

The scanner runs in a worker thread (asyncio.to_thread) and is synchronous; `DbVerdictCache` answers it by
running the queries on the event loop that created it and waiting for them (the loop is free: it awaits the
thread). Used from the loop's own thread it would wait on itself, so there it caches nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from datetime import timedelta
from typing import Any

from backend import clock
from backend.injection import verdicts
from backend.staging.tables import InjectionVerdict

RETENTION_DAYS = 30
MAX_PER_COMPANY = 200_000  # distinct prose cells: at 5,000 rows × 3 datasets a proposal, many weeks of runs
CHUNK = 500  # hashes per query (SQLite's bound parameters)
log = logging.getLogger(__name__)


async def lookup(company_id: int, fingerprint: str, hashes: list[str]) -> dict[str, dict[str, Any]]:
    cutoff = clock.now() - timedelta(days=RETENTION_DAYS)
    out: dict[str, dict[str, Any]] = {}
    t = InjectionVerdict
    for i in range(0, len(hashes), CHUNK):
        rows = await t.select(t.cell_sha256, t.verdict).where(
            (t.company == company_id)
            & (t.fingerprint == fingerprint)
            & t.cell_sha256.is_in(hashes[i : i + CHUNK])
            & (t.stored_at >= cutoff)
        )
        for row in rows:
            out[row["cell_sha256"]] = json.loads(row["verdict"])
    return out


async def store(company_id: int, fingerprint: str, found: dict[str, dict[str, Any]]) -> None:
    """Insert new verdicts; one already there (a concurrent scan of the same cell, an expired one) is
    replaced by the delete before the insert."""
    if not found:
        return
    t = InjectionVerdict
    now = clock.now()
    hashes = list(found)
    for i in range(0, len(hashes), CHUNK):
        part = hashes[i : i + CHUNK]
        await t.delete().where(
            (t.company == company_id) & (t.fingerprint == fingerprint) & t.cell_sha256.is_in(part)
        )
        await t.insert(
            *[
                t(
                    company=company_id,
                    cell_sha256=h,
                    fingerprint=fingerprint,
                    verdict=verdicts.dumps(found[h]),
                    stored_at=now,
                )
                for h in part
            ]
        ).on_conflict(action="DO NOTHING")
    await prune(company_id, fingerprint)


async def prune(company_id: int, fingerprint: str) -> int:
    """Delete a company's verdicts past RETENTION_DAYS or of another fingerprint, then the oldest beyond
    MAX_PER_COMPANY. Returns how many rows are left."""
    t = InjectionVerdict
    cutoff = clock.now() - timedelta(days=RETENTION_DAYS)
    await t.delete().where(
        (t.company == company_id) & ((t.stored_at < cutoff) | (t.fingerprint != fingerprint))
    )
    left = await t.count().where(t.company == company_id)
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
        left = await t.count().where(t.company == company_id)
    return left


class DbVerdictCache:
    """verdicts.VerdictCache over the database, for one company and the current fingerprint."""

    def __init__(self, company_id: int, fingerprint: str | None = None) -> None:
        self.company_id = company_id
        self.fingerprint = fingerprint or verdicts.fingerprint()
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()

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
        except Exception:  # noqa: BLE001 - a cache that cannot store costs a re-scan next time, nothing more
            log.exception("storing %d injection verdicts failed", len(found))
