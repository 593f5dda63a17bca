"""`cleanroom bench datasets`: the export a run gets of a company-defined dataset of 1,000,000 rows, for a member
who sees 10 % of it (100,000 rows, cut at the 5,000-row cap), against the same export of a built-in table
(`tasks`) of 1,000,000 rows with the same owners, teams and visibility: the figures docs/datasets.md argues
the storage design with (issue 54, goal: <= 0.5 s p50).

PostgreSQL only (the goal is PostgreSQL's): a fresh database on CLEANROOM_BENCH_POSTGRES_URL (default the
machine's cluster, postgresql://cleanroom:cleanroom@127.0.0.1:5432/postgres), dropped at the end. The rows are
written by SQL (generate_series): the import's own speed is `cleanroom bench` of the import, not this.
CLEANROOM_BENCH_DATASET_ROWS (default 1,000,000) and CLEANROOM_BENCH_DATASET_RUNS (default 11) scale it."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

from backend.benches import summarize

DEFAULT_SERVER = "postgresql://cleanroom:cleanroom@127.0.0.1:5432/postgres"

# who owns what, row g (1-based): every 10th row is the member's to see (a company row, a row of the member's
# team, or the member's own private row, in turn); the other nine are another person's private rows or rows
# of a team the member is not in
_OWNER = (
    "CASE WHEN g % 10 = 0 AND (g / 10) % 3 = 2 THEN {member} WHEN g % 10 = 0 THEN {admin} ELSE {other} END"
)
_TEAM = (
    "CASE WHEN g % 10 = 0 AND (g / 10) % 3 = 1 THEN {mine} WHEN g % 10 <> 0 AND g % 2 = 0 THEN {theirs} END"
)
_VISIBILITY = (
    "CASE WHEN g % 10 = 0 THEN (ARRAY['company', 'team', 'private'])[(g / 10) % 3 + 1] "
    "WHEN g % 2 = 0 THEN 'team' ELSE 'private' END"
)

COLUMNS = [
    ("ref", "string"),
    ("customer", "string"),
    ("origin", "string"),
    ("destination", "string"),
    ("carrier", "string"),
    ("status", "string"),
    ("weight_kg", "number"),
    ("pieces", "integer"),
    ("declared_value", "number"),
    ("shipped_on", "date"),
    ("delivered_at", "datetime"),
    ("insured", "boolean"),
]
_VALUES = (
    "jsonb_build_object('ref', 'S' || g, 'customer', 'Customer ' || (g % 5000), 'origin', 'Warehouse ' || (g % 40), "
    "'destination', 'City ' || (g % 900), 'carrier', (ARRAY['dhl', 'ups', 'fedex', 'postnl'])[g % 4 + 1], "
    "'status', (ARRAY['booked', 'in_transit', 'delivered', 'returned'])[g % 4 + 1], "
    "'weight_kg', ((g % 9000) / 10.0)::text, 'pieces', g % 40, 'declared_value', ((g % 100000) / 100.0)::text, "
    "'shipped_on', to_char(DATE '2025-01-01' + (g % 600), 'YYYY-MM-DD'), "
    "'delivered_at', to_char(TIMESTAMPTZ '2025-01-03 00:00:00+00' + (g % 600) * INTERVAL '1 day', "
    "'YYYY-MM-DD\"T\"HH24:MI:SS+00:00'), 'insured', g % 3 = 0)"
)


def _chunks(rows: int, size: int = 100_000) -> list[tuple[int, int]]:
    return [(low, min(low + size - 1, rows)) for low in range(1, rows + 1, size)]


async def _setup(rows: int) -> dict[str, Any]:
    from backend import clock
    from backend.records import defined
    from backend.records import tables as t
    from backend.records.columns import ColumnKind
    from backend.records.values import ColumnSpec
    from backend.tenancy.context import OPERATOR, load_user_context
    from backend.tenancy.tables import Company, PermissionSet, Team, TeamMembership, User, UserPermissionSet

    company = (await Company.insert(Company(name="Bench Co", created_at=clock.now())).returning(Company.id))[
        0
    ]["id"]
    ids = {}
    for who, role in (("admin", "admin"), ("member", "member"), ("other", "member")):
        user = User(company=company, email=f"{who}@bench.example", name=who, password_hash="-", role=role)
        ids[who] = (await User.insert(user).returning(User.id))[0]["id"]
    teams = {}
    for name in ("mine", "theirs"):
        teams[name] = (await Team.insert(Team(company=company, name=name)).returning(Team.id))[0]["id"]
    await TeamMembership.insert(
        TeamMembership(team=teams["mine"], user=ids["member"]),
        TeamMembership(team=teams["theirs"], user=ids["other"]),
    )
    grants = {"shipments": "read", "tasks": "read"}
    ps = (
        await PermissionSet.insert(PermissionSet(company=company, name="b", grants=grants)).returning(
            PermissionSet.id
        )
    )[0]
    await UserPermissionSet.insert(UserPermissionSet(user=ids["member"], permission_set=ps["id"]))
    admin = await load_user_context(ids["admin"], auth=OPERATOR)
    spec = defined.DatasetSpec(
        "shipments", "Shipments", [ColumnSpec(n, ColumnKind(k)) for n, k in COLUMNS], key_column="ref"
    )
    dataset = await defined.define_dataset(admin, spec)
    marks = {**ids, **teams}
    owner, team = _OWNER.format(**marks), _TEAM.format(**marks)
    began = time.perf_counter()
    for low, high in _chunks(
        rows
    ):  # statements of 100,000 rows: each well within the pool's statement timeout
        await t.DatasetRow.raw(
            'INSERT INTO "dataset_row" ("company", "dataset", "external_key", "owner", "team", "visibility", '
            f'"values", "created_at", "updated_at", "version") SELECT {company}, {dataset.id}, \'S\' || g, '
            f"{owner}, {team}, {_VISIBILITY}, {_VALUES}, now(), now(), 1 FROM generate_series({low}, {high}) g"
        )
    defined_fill = time.perf_counter() - began
    began = time.perf_counter()
    for low, high in _chunks(rows):
        await t.Task.raw(
            'INSERT INTO "task" ("company", "owner", "team", "visibility", "created_at", "updated_at", "version", '
            '"title", "status", "priority", "due_date", "related_deal_id", "description") '
            f"SELECT {company}, {owner}, {team}, {_VISIBILITY}, now(), now(), 1, 'Task ' || g, "
            "(ARRAY['open', 'in_progress', 'done', 'cancelled'])[g % 4 + 1], "
            "(ARRAY['low', 'normal', 'high', 'urgent'])[g % 4 + 1], DATE '2025-01-01' + (g % 600), NULL, "
            f"'Call customer ' || (g % 5000) FROM generate_series({low}, {high}) g"
        )
    builtin_fill = time.perf_counter() - began
    # the state autovacuum leaves a bulk-loaded table in (PostgreSQL >= 13 vacuums after inserts too): the
    # visibility map set, so counting what a reader sees can be an index-only scan
    await t.DatasetRow.raw('VACUUM ANALYZE "dataset_row"')
    await t.Task.raw('VACUUM ANALYZE "task"')
    sizes = await t.DatasetRow.raw(
        "SELECT pg_total_relation_size('dataset_row') AS defined, pg_total_relation_size('task') AS builtin"
    )
    member = await load_user_context(ids["member"], auth=OPERATOR)
    return {
        "member": member,
        "fill_s": {"company_defined": round(defined_fill, 1), "builtin": round(builtin_fill, 1)},
        "table_mb": {k: round(v / 2**20) for k, v in sizes[0].items()},
    }


async def _time(fn: Any, runs: int) -> tuple[dict[str, Any], Any]:
    await fn()  # warm: the first read pulls the pages into shared buffers
    samples, last = [], None
    for _ in range(runs):
        began = time.perf_counter()
        last = await fn()
        samples.append((time.perf_counter() - began) * 1000)
    return summarize(samples), last


async def _measure(rows: int, runs: int) -> dict[str, Any]:
    from backend.records import service
    from backend.records.export import visible_rows

    setup = await _setup(rows)
    member = setup.pop("member")
    out: dict[str, Any] = {"rows_per_dataset": rows, **setup}
    for label, name in (("company_defined", "shipments"), ("builtin", "tasks")):

        async def export(name: str = name) -> Any:
            return (await visible_rows(member, name, 5000)).export()

        async def page(name: str = name) -> Any:
            return await service.list_records(member, name, page_size=50)

        export_ms, last = await _time(export, runs)
        page_ms, first_page = await _time(page, runs)
        out[label] = {
            "export_5000_ms": export_ms,
            "exported_rows": last.rows,
            "visible_total": last.visible_total,
            "truncated": last.truncated,
            "csv_bytes": len(last.csv),
            "records_page_50_ms": page_ms,
            "page_total": first_page.total,
        }
    return out


def bench_datasets() -> dict[str, Any]:
    import psycopg

    from backend import db

    server = os.environ.get("CLEANROOM_BENCH_POSTGRES_URL") or DEFAULT_SERVER
    rows = int(os.environ.get("CLEANROOM_BENCH_DATASET_ROWS", "1000000"))
    runs = int(os.environ.get("CLEANROOM_BENCH_DATASET_RUNS", "11"))
    name = f"bench_datasets_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    url = server.rsplit("/", 1)[0] + "/" + name

    async def main() -> dict[str, Any]:
        db.configure(url)
        await db.create_schema()
        await db.start_pool()
        try:
            return await _measure(rows, runs)
        finally:
            await db.close_pool()

    try:
        result = asyncio.run(main())
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]
    result["database"] = "postgresql"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    result["load"] = f"one process, one caller; {os.cpu_count()} cores, load average {load} at the end"
    return result
