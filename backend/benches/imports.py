"""`cleanroom bench imports`: company-defined datasets fed from outside, on PostgreSQL (issue 54 goals).

- import: a 1,000,000-row x 12-column CSV imported (applied, one transaction) into a new dataset by the admin,
  through the real path (the confined converter child streams the rows; `importing.import_file`). Goal:
  >= 20,000 rows/s, peak RSS <= 500 MiB. It runs in a worker process of its own, so the RSS measured is the
  import's (VmHWM of the service-side process; the converter child's peak is reported beside it).
- sync: a source table of 1,000,000 rows in a second database, synced once in full, then 10,000 of its rows
  changed (updated-at bumped) and synced incrementally. Goal: the incremental sync <= 2 s.

Databases: `cleanroom_bench_imports_<pid>` and `cleanroom_bench_source_<pid>` (CLEANROOM_BENCH_IMPORT_DB names
the first) on the machine's cluster (CLEANROOM_BENCH_POSTGRES_URL, default
postgresql://cleanroom:cleanroom@127.0.0.1:5432/postgres), made afresh and dropped at the end: two sessions'
runs at once no longer drop each other's database.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BASE_URL = os.environ.get(
    "CLEANROOM_BENCH_POSTGRES_URL", "postgresql://cleanroom:cleanroom@127.0.0.1:5432/postgres"
)
TARGET_DB = os.environ.get("CLEANROOM_BENCH_IMPORT_DB") or f"cleanroom_bench_imports_{os.getpid()}"
SOURCE_DB = TARGET_DB.replace("imports", "source") if "imports" in TARGET_DB else f"{TARGET_DB}_source"
ROWS = int(os.environ.get("CLEANROOM_BENCH_IMPORT_ROWS", "1000000"))
CHANGED = 10_000
ADMIN = "admin@acme.example"
COLUMNS = [
    ("ref", "string"),
    ("customer", "string"),
    ("region", "string"),
    ("quantity", "integer"),
    ("weight", "number"),
    ("price", "number"),
    ("shipped_on", "date"),
    ("fragile", "boolean"),
    ("status", "string"),
    ("carrier", "string"),
    ("note", "string"),
    ("updated", "datetime"),
]


def _url(name: str) -> str:
    return BASE_URL.rsplit("/", 1)[0] + "/" + name


async def _admin(*statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(BASE_URL)
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


def write_csv(path: Path, rows: int) -> None:
    regions = ("north", "south", "east", "west")
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow([name for name, _ in COLUMNS])
        for i in range(rows):
            out.writerow(
                [
                    f"R-{i:07d}",
                    f"Customer {i % 5000}",
                    regions[i % 4],
                    i % 100,
                    f"{(i % 1000) / 10:.1f}",
                    f"{(i % 9973) / 100:.2f}",
                    f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
                    "true" if i % 3 == 0 else "false",
                    "shipped",
                    "DHL",
                    f"parcel {i}",
                    "2026-06-01T12:00:00+00:00",
                ]
            )


def _spec():
    from backend.records import defined
    from backend.records.columns import ColumnKind
    from backend.records.values import TEXT_MAX, ColumnSpec

    return defined.DatasetSpec(
        name="shipments",
        label="Shipments",
        columns=[ColumnSpec(n, ColumnKind(k), True, TEXT_MAX if k == "string" else None) for n, k in COLUMNS],
        key_column="ref",
    )


async def _prepare() -> None:
    from backend import db
    from backend.demo.seed import seed

    await _admin(f'DROP DATABASE IF EXISTS "{TARGET_DB}" WITH (FORCE)', f'CREATE DATABASE "{TARGET_DB}"')
    db.configure(_url(TARGET_DB))
    await db.start_pool(timeouts=False)
    try:
        await db.create_schema()
        await seed()
    finally:
        await db.close_pool()


async def _import(path: Path) -> dict[str, Any]:
    from backend import db
    from backend.records import importing
    from backend.tenancy.context import load_user_context_by_email

    db.configure(_url(TARGET_DB))
    await db.start_pool(timeouts=False)
    try:
        ctx = await load_user_context_by_email(ADMIN)
        streams = []
        opened = importing.stream_rows

        def keep(*args: Any, **kwargs: Any) -> Any:
            streams.append(opened(*args, **kwargs))
            return streams[-1]

        importing.stream_rows = keep  # to read the converter child's own peak at the end
        started = time.perf_counter()
        report = await importing.import_file(ctx, "shipments", path, path.name, dry_run=False, create=_spec())
        seconds = time.perf_counter() - started
    finally:
        await db.close_pool()
    text = await asyncio.to_thread(Path("/proc/self/status").read_text)
    status = dict(line.split(":", 1) for line in text.splitlines())
    return {
        "seconds": round(seconds, 2),
        "added": report["added"],
        "refused": report["refused"],
        "peak_rss_mib": round(int(status["VmHWM"].split()[0]) / 1024, 1),
        "converter_peak_rss_mib": round(streams[0].stats.get("peak_rss_kib", 0) / 1024, 1),
    }


async def _sync() -> dict[str, Any]:
    import asyncpg

    from backend import db
    from backend.records import defined, sync
    from backend.tenancy.context import load_user_context_by_email

    await _admin(f'DROP DATABASE IF EXISTS "{SOURCE_DB}" WITH (FORCE)', f'CREATE DATABASE "{SOURCE_DB}"')
    conn = await asyncpg.connect(_url(SOURCE_DB))
    try:
        await conn.execute(
            "CREATE TABLE orders AS SELECT 'O-' || g AS ref, 'Customer ' || (g % 5000) AS customer, "
            "(ARRAY['north','south','east','west'])[1 + g % 4] AS region, g % 100 AS quantity, "
            "(g % 1000) / 10.0 AS weight, (g % 9973) / 100.0 AS price, "
            "DATE '2026-01-01' + (g % 365) AS shipped_on, g % 3 = 0 AS fragile, 'shipped' AS status, "
            "'DHL' AS carrier, 'parcel ' || g AS note, "
            "TIMESTAMPTZ '2026-01-01' + g * INTERVAL '1 second' AS updated "
            f"FROM generate_series(1, {ROWS}) g;"
            "CREATE INDEX ON orders (updated);"
        )
    finally:
        await conn.close()
    db.configure(_url(TARGET_DB))
    await db.start_pool(timeouts=False)
    try:
        admin = await load_user_context_by_email(ADMIN)
        spec = dataclasses.replace(_spec(), name="orders", label="Orders")
        dataset = await defined.define_dataset(admin, spec)
        await sync.set_source(
            dataset, owner_id=admin.user_id, dsn=_url(SOURCE_DB), table="orders", updated_at_column="updated"
        )
        started = time.perf_counter()
        full = await sync.sync_dataset(dataset, actor="bench")
        full_seconds = time.perf_counter() - started
        conn = await asyncpg.connect(_url(SOURCE_DB))
        try:
            await conn.execute(
                "UPDATE orders SET quantity = quantity + 1, updated = TIMESTAMPTZ '2027-01-01' + "
                f"(substr(ref, 3)::int) * INTERVAL '1 second' WHERE substr(ref, 3)::int % {ROWS // CHANGED} = 0"
            )
        finally:
            await conn.close()
        started = time.perf_counter()
        incremental = await sync.sync_dataset(dataset, actor="bench")
        incremental_seconds = time.perf_counter() - started
    finally:
        await db.close_pool()
    return {
        "full_sync_seconds": round(full_seconds, 2),
        "full_sync_rows": full["added"],
        "incremental_sync_seconds": round(incremental_seconds, 3),
        "incremental_rows_read": incremental["rows_read"],
        "incremental_changed": incremental["changed"],
    }


def run() -> dict[str, Any]:
    """The suite: prepares the databases, runs the import in a worker process, then the syncs; the databases
    are dropped at the end, whatever the end."""
    result: dict[str, Any] = {"rows": ROWS, "columns": len(COLUMNS), "load": os.getloadavg()[0]}
    try:
        with tempfile.TemporaryDirectory(prefix="cleanroom-bench-imports-") as folder:
            path = Path(folder) / "shipments.csv"
            write_csv(path, ROWS)
            result["file_mib"] = round(path.stat().st_size / 2**20, 1)
            asyncio.run(_prepare())
            # the worker's database: this run's
            worker = subprocess.run(
                [sys.executable, "-m", "backend.benches.imports", "--import", str(path)],
                env={**os.environ, "CLEANROOM_BENCH_IMPORT_DB": TARGET_DB},
                capture_output=True,
                text=True,
                check=False,
            )
            if worker.returncode != 0:
                raise RuntimeError(f"the import worker failed: {worker.stderr[-2000:]}")
            figures = json.loads(worker.stdout.strip().splitlines()[-1])
        result["import"] = {
            **figures,
            "rows_per_second": round(ROWS / figures["seconds"]),
            "goal_rows_per_second": 20_000,
            "goal_peak_rss_mib": 500,
        }
        result["sync"] = {**asyncio.run(_sync()), "goal_incremental_seconds": 2.0}
    finally:
        asyncio.run(
            _admin(
                f'DROP DATABASE IF EXISTS "{TARGET_DB}" WITH (FORCE)',
                f'DROP DATABASE IF EXISTS "{SOURCE_DB}" WITH (FORCE)',
            )
        )
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--import"]:
        print(json.dumps(asyncio.run(_import(Path(sys.argv[2])))))
    else:
        print(json.dumps(run(), indent=1))
