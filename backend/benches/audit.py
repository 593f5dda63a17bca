"""`cleanroom bench audit`: how many audit entries one process appends a second when many requests record at
once (issue 30: proposals queued on the append lock at about ten a second), entries recorded together
committed together against the same code made to commit one entry at a time (`BATCH` = 1), on a fresh
database: SQLite in a temporary folder, or PostgreSQL when CLEANROOM_BENCH_POSTGRES_URL names a server.
Each mode ends with `verify()` of the whole chain, which must hold."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

CONCURRENT = 50
ENTRIES = 600


async def _append_wave(concurrent: int, entries: int) -> dict[str, Any]:
    from backend.audit import service as audit

    gate = asyncio.Semaphore(concurrent)
    latencies: list[float] = []

    async def one(i: int) -> None:
        async with gate:
            began = time.perf_counter()
            await audit.record(
                "bench.entry", actor="bench", company_id=1 + i % 3, subject_type="bench", subject_id=i
            )
            latencies.append((time.perf_counter() - began) * 1000)

    await one(-1)  # the first append opens what the others reuse
    latencies.clear()
    began = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(entries)))
    elapsed = time.perf_counter() - began
    verified = await audit.verify()
    return {
        "entries_per_second": round(entries / elapsed),
        "record_ms_p50": round(statistics.median(latencies), 1),
        "record_ms_max": round(max(latencies), 1),
        "chain_verifies": verified.ok,
    }


async def _mode(url: str, batch: int | None, concurrent: int, entries: int) -> dict[str, Any]:
    from backend import db
    from backend.audit import service as audit

    db.configure(url)
    await db.create_schema()
    await db.start_pool()
    saved = audit.BATCH
    try:
        if batch is not None:
            audit.BATCH = batch
        return await _append_wave(concurrent, entries)
    finally:
        audit.BATCH = saved
        await db.close_pool()


def bench_audit(concurrent: int = CONCURRENT, entries: int = ENTRIES) -> dict[str, Any]:
    import psycopg

    from backend.settings import get_settings

    settings = get_settings()
    root = Path(tempfile.mkdtemp(prefix="cleanroom-bench-audit-"))
    server = os.environ.get("CLEANROOM_BENCH_POSTGRES_URL")
    saved_dir, settings.data_dir = settings.data_dir, root / "data"  # the anchor files go here
    results: dict[str, Any] = {
        "database": "postgresql" if server else "sqlite",
        "concurrent_callers": concurrent,
        "entries": entries,
    }
    try:
        for mode, batch in (("one_commit_per_entry", 1), ("recorded_together_committed_together", None)):
            if server:
                name = f"bench_audit_{uuid.uuid4().hex[:10]}"
                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
                url = server.rsplit("/", 1)[0] + "/" + name
            else:
                url = f"sqlite:///{root / (mode + '.sqlite3')}"
            try:
                results[mode] = asyncio.run(_mode(url, batch, concurrent, entries))
            finally:
                if server:
                    with psycopg.connect(server, autocommit=True) as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]
        one = results["one_commit_per_entry"]["entries_per_second"]
        together = results["recorded_together_committed_together"]["entries_per_second"]
        results["ratio_together_to_one_by_one"] = round(together / one, 2) if one else None
    finally:
        settings.data_dir = saved_dir
        shutil.rmtree(root, ignore_errors=True)
    return results
