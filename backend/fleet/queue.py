"""The job queue between the API and the workers: procrastinate on the product's PostgreSQL.

The API decides *which* queued run goes next (companies in turn, `backend.execution.loop.queued_runs`) and
*to which host*: it hands a run to procrastinate only while a slot of some host is free for it, into that
host's own queue (`runs.<host id>`), and records the host on the run (`dispatched_to`); only that host's
worker may claim it (`service.claim`). So the queue never holds a long FIFO one company filled: a company
already at its share of the slots waits while another company's runs wait. Procrastinate delivers each job
to its host's worker (LISTEN/NOTIFY, so pickup is immediate) and keeps it across restarts of the API.

Each host's worker reaches the queue with a PostgreSQL role of its own (`make_worker_role`, `cleanroom
workers db-role HOST`): procrastinate's tables, sequences and functions, its rows limited by row-level
security to its own host's queue, nothing of the product's, no temporary table. A hypervisor host runs
hostile code in VMs; it holds no credential that reads or changes a company's data or another host's jobs,
and no lock the API waits on: the API's own locks are on tables its role cannot see (`backend/locks.py`),
and a host's session that keeps anyone waiting on a lock of procrastinate's tables is ended
(`cut_off_blockers`). The API's connections carry a lock and a statement timeout (`api_options`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import procrastinate
import psycopg
from piccolo.query.functions.aggregate import Count
from procrastinate.exceptions import AlreadyEnqueued, ProcrastinateException
from procrastinate.jobs import Status
from psycopg import sql

from backend import locks
from backend.execution.loop import queued_runs
from backend.execution.retention import sweep_bundles
from backend.fleet import jobs, service
from backend.fleet.jobs import DEFERS, EVENTS, JOBS, TASK, WORKERS, host_of, queue_of
from backend.fleet.tables import WorkerHost
from backend.records import jobs as record_jobs
from backend.records import sync as records_sync
from backend.runs import queued
from backend.runs.tables import Run, RunStatus
from backend.schedules import service as schedules
from backend.settings import get_settings

log = logging.getLogger("cleanroom.fleet")
SCHEMA_LOCK = locks.SCHEMA  # the row of `api_lock` held while one process applies procrastinate's schema
LEADER_LOCK = locks.LEADER_LOCK  # `api_leader` locked for as long as an API process of a fleet dispatches
WAKE_CHANNEL = "cleanroom_dispatch"  # NOTIFY: a run queued in another API process wakes the dispatching one
PREFIX = "procrastinate_"  # procrastinate's tables, sequences and functions: all a worker's role may use
LIKE_PREFIX = PREFIX.replace("_", "\\_") + "%"
WORKER_ROLE = "cleanroom_worker"
REAP_EVERY_SECONDS = 1.0  # the dispatcher's loop looks for lost hosts and stalled jobs at most this often
# (or every heartbeat, when that is shorter)


def lock_of(run_id: int) -> str:
    """The run's queueing lock: procrastinate refuses a second job of it while one waits (`todo`)."""
    return f"run-{run_id}"


def database_url() -> str:
    """The database the tables are bound to (the API may be given one), else the settings' one."""
    bound = getattr(Run._meta, "_db", None)  # not `.db`: that would go looking for a piccolo_conf module
    dsn = getattr(bound, "config", {}).get("dsn") if bound is not None else None
    return dsn or get_settings().effective_database_url


def api_options() -> str:
    """The API's `lock_timeout` and `statement_timeout` (settings), as libpq's `options`: the API's own
    connections to the job queue carry them as its pool's do (`db.start_pool`)."""
    return " ".join(f"-c {name}={value}" for name, value in get_settings().postgres_timeouts().items())


async def api_connection(
    url: str | None = None, *, extra: str = "", **kwargs: Any
) -> psycopg.AsyncConnection:
    """A connection of the API's own (not the pool's), with the API's timeouts (and `extra` options)."""
    options = f"{api_options()} {extra}".strip()
    return await psycopg.AsyncConnection.connect(url or database_url(), options=options, **kwargs)


def make_app(url: str | None = None, *, name: str = "cleanroom-api") -> procrastinate.App:
    """The job queue's app as the API side opens it (`jobs.make_app`): on the tables' database unless `url`
    is given; the API's own (`cleanroom-api`) carries its timeouts."""
    return jobs.make_app(
        url or database_url(), name=name, options=api_options() if name == "cleanroom-api" else ""
    )


async def ensure_schema(app: procrastinate.App, url: str | None = None) -> None:
    """Procrastinate's tables, once per database (under the `schema` row of `api_lock`: API processes may
    race). The API applies it; a worker's role may not create anything (`schema_ready`)."""
    url = url or database_url()
    async with await api_connection(url) as conn, conn.transaction():
        row = await (await conn.execute(locks.ROW_LOCK.format("%s"), (SCHEMA_LOCK,))).fetchone()
        if row is None:
            raise locks.missing(SCHEMA_LOCK)
        row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
        if row and row[0]:
            return
        await conn.execute(app.schema_manager.get_schema())
        log.info("procrastinate schema applied")


WORKER_ROLE_PREFIX = "cleanroom_worker_"  # a host's role: this and its host id
WORKER_CONNECTION_LIMIT = 10  # a host's worker holds 5-6 (procrastinate's pool, its listener, a check)
LOCK_MAX = 128  # the longest `lock` a host may give its own job (procrastinate's retry may set one)
OWNER_COLUMN = "cleanroom_role"  # procrastinate_workers: the role that registered the row
# What a host's worker changes in its own jobs (procrastinate's fetch, finish and retry functions): never
# the arguments, task or queueing lock the API wrote. Column privileges: no table-wide UPDATE.
JOB_COLUMNS = (
    "status",
    "worker_id",
    "attempts",
    "abort_requested",
    "scheduled_at",
    "priority",
    "queue_name",
    "lock",
)


def worker_role_of(host_id: str) -> str:
    return f"{WORKER_ROLE_PREFIX}{host_id}"


def _policies(role: str, host_id: str) -> dict[str, list[sql.Composable]]:
    """The row-level policies of `role` on procrastinate's tables, which the API's role owns (the owner is
    not subject to them; every other role sees no row of a table without a policy of its own):
    - jobs: only those of its host's queue, seen, taken, finished or retried, and none moved out of it;
      no job inserted (no INSERT privilege either: the API makes the jobs);
    - events: inserted only by procrastinate's triggers (`pg_trigger_depth`), of its own jobs; none read;
    - periodic defers (none in this product): none seen (the trigger that unlinks a deleted job's runs);
    - workers: only the rows this role registered (`cleanroom_role`), so no host ends another's worker."""
    name, who = sql.Identifier(role), sql.Identifier(role)
    queue = sql.Literal(queue_of(host_id))
    own_job = sql.SQL("queue_name = {}").format(queue)
    return {
        JOBS: [
            sql.SQL("CREATE POLICY {} ON procrastinate_jobs TO {} USING ({}) WITH CHECK ({} AND ").format(
                name, who, own_job, own_job
            )
            + sql.SQL("coalesce(length(lock), 0) <= {})").format(sql.Literal(LOCK_MAX))
        ],
        EVENTS: [
            sql.SQL(
                "CREATE POLICY {} ON procrastinate_events FOR INSERT TO {} WITH CHECK (pg_trigger_depth() > 0 "
                "AND EXISTS (SELECT 1 FROM procrastinate_jobs j WHERE j.id = job_id))"
            ).format(name, who)
        ],
        DEFERS: [
            sql.SQL(
                "CREATE POLICY {} ON procrastinate_periodic_defers TO {} USING (false) WITH CHECK (false)"
            ).format(name, who)
        ],
        WORKERS: [
            sql.SQL(
                "CREATE POLICY {} ON procrastinate_workers TO {} USING ({} = current_user) WITH CHECK ({} = current_user)"
            ).format(name, who, sql.Identifier(OWNER_COLUMN), sql.Identifier(OWNER_COLUMN))
        ],
    }


# what each table grants a host's role (its rows limited by the policies above)
TABLE_GRANTS = {
    JOBS: "GRANT SELECT, DELETE, UPDATE ({}) ON procrastinate_jobs TO {{}}".format(", ".join(JOB_COLUMNS)),
    EVENTS: "GRANT INSERT ON procrastinate_events TO {}",
    DEFERS: "GRANT SELECT (job_id), UPDATE (job_id) ON procrastinate_periodic_defers TO {}",
    WORKERS: "GRANT SELECT, INSERT, UPDATE (last_heartbeat), DELETE ON procrastinate_workers TO {}",
}


@dataclass
class WorkerRole:
    role: str
    granted: list[str]  # procrastinate's tables, sequences and functions
    connect_revoked: list[str]  # other databases PUBLIC may no longer connect to
    connect_left: list[str]  # other databases the role may still connect to (not this role's to change)
    can_cut_off: bool  # the API's role may end this role's sessions (`cut_off_blockers`)


async def make_worker_role(
    url: str,
    host_id: str,
    password: str,
    *,
    role: str | None = None,
    other_databases: list[str] | None = None,
) -> WorkerRole:
    """Create (or bring back to exactly this) host `host_id`'s PostgreSQL role in the database of `url` (the
    API's): it logs in with `password` (sent as a SCRAM verifier, never in clear), at most
    `WORKER_CONNECTION_LIMIT` connections at once, and may use procrastinate's objects, its rows limited to
    its host's queue by row-level security (`_policies`), and nothing else. Idempotent; run again after an
    upgrade of procrastinate.

    Also: PUBLIC loses TEMP on this database (a host could fill its disk with temporary tables; the API's
    own role keeps TEMP by a grant of its own), and CONNECT and TEMP on every other database of the cluster
    that this role may change (`other_databases`: those only; None: every one); the others are returned.
    The API's role is made a member of the role, so it may end the role's sessions (`cut_off_blockers`).
    Raises when the role can still reach a product table (a grant to PUBLIC) or a procrastinate function
    runs as its owner."""
    role = role or worker_role_of(host_id)
    app = make_app(url)
    await ensure_schema(app, url)
    granted: list[str] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()
        name = sql.Identifier(role)
        exists = await (await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))).fetchone()
        attributes = sql.SQL(
            "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS CONNECTION LIMIT {} PASSWORD {}"
        ).format(sql.Literal(WORKER_CONNECTION_LIMIT), sql.Literal(verifier))
        verb = sql.SQL("ALTER ROLE" if exists else "CREATE ROLE")
        await conn.execute(sql.SQL("{} {} {}").format(verb, name, attributes))
        schema = (
            await (
                await conn.execute(
                    "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE c.oid = to_regclass('procrastinate_jobs')"
                )
            ).fetchone()
        )[0]
        database = (await (await conn.execute("SELECT current_database()")).fetchone())[0]
        db_name = sql.Identifier(database)
        async with conn.transaction():
            nsp = sql.Identifier(schema)
            # whatever the role was given before (a re-run after an upgrade, a hand-made grant): gone
            for kind in ("TABLES", "SEQUENCES", "FUNCTIONS"):
                await conn.execute(
                    sql.SQL("REVOKE ALL ON ALL {} IN SCHEMA {} FROM {}").format(sql.SQL(kind), nsp, name)
                )
            await conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(db_name, name))
            await conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db_name, name))
            # no temporary tables for anyone but the API's own role (which may be the database's owner)
            await conn.execute(sql.SQL("GRANT TEMPORARY ON DATABASE {} TO CURRENT_USER").format(db_name))
            await conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(db_name))
            await conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(nsp, name))
            # which role registered each worker row (procrastinate's insert is its own role's)
            await conn.execute(
                sql.SQL(
                    "ALTER TABLE procrastinate_workers ADD COLUMN IF NOT EXISTS {} name NOT NULL DEFAULT current_user"
                ).format(sql.Identifier(OWNER_COLUMN))
            )
            for table, policies in _policies(role, host_id).items():
                await conn.execute(
                    sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(sql.Identifier(table))
                )
                await conn.execute(
                    sql.SQL("DROP POLICY IF EXISTS {} ON {}").format(name, sql.Identifier(table))
                )
                for policy in policies:
                    await conn.execute(policy)
                await conn.execute(sql.SQL(TABLE_GRANTS[table]).format(name))
                granted.append(table)
            objects = await (
                await conn.execute(
                    "SELECT c.relkind::text, c.oid::regclass::text FROM pg_class c "
                    "WHERE c.relnamespace = %s::regnamespace AND c.relname LIKE %s AND c.relkind = 'S' "
                    "UNION ALL SELECT 'f', p.oid::regprocedure::text FROM pg_proc p "
                    "WHERE p.pronamespace = %s::regnamespace AND p.proname LIKE %s ORDER BY 1, 2",
                    (schema, LIKE_PREFIX, schema, LIKE_PREFIX),
                )
            ).fetchall()
            for kind, target in objects:
                grant = {
                    "S": "GRANT USAGE, SELECT ON SEQUENCE {} TO {}",
                    "f": "GRANT EXECUTE ON FUNCTION {} TO {}",
                }[kind]
                await conn.execute(sql.SQL(grant).format(sql.SQL(target), name))
                granted.append(target)
        definers = await (
            await conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.proname LIKE %s AND p.prosecdef",
                (LIKE_PREFIX,),
            )
        ).fetchall()
        temp = (
            await (
                await conn.execute("SELECT has_database_privilege(%s, current_database(), 'TEMP')", (role,))
            ).fetchone()
        )[0]
        can_cut_off = await _member_of(conn, role)
        revoked, left = await _revoke_other_databases(conn, role, other_databases)
    if definers:  # would run with their owner's rights, whatever the role was granted
        raise RuntimeError(f"procrastinate functions run as their owner (SECURITY DEFINER): {definers}")
    if temp:  # REVOKE by a role that does not own the database only warns
        raise RuntimeError(
            f"PUBLIC keeps TEMP on database {database}: as its owner run "
            f'REVOKE TEMPORARY ON DATABASE "{database}" FROM PUBLIC, then this again'
        )
    return WorkerRole(role, granted, revoked, left, can_cut_off)


async def _member_of(conn: psycopg.AsyncConnection, role: str) -> bool:
    """Make the API's role a member of `role` (what PostgreSQL asks before one role ends another's session),
    unless it is a superuser already; False when it may not (the operator grants it, or nothing cuts off a
    host holding a lock the API waits on)."""
    row = await (await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")).fetchone()
    if row and row[0]:
        return True
    try:
        await conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(role)))
    except psycopg.errors.InsufficientPrivilege as exc:
        log.warning("the API's role cannot be made a member of %s: %s", role, exc)
        return False
    return True


async def _revoke_other_databases(
    conn: psycopg.AsyncConnection, role: str, only: list[str] | None
) -> tuple[list[str], list[str]]:
    """PUBLIC's CONNECT and TEMP taken from the cluster's other databases `role` may connect to (`only`:
    those of them); those not to be changed, and those this connection's role may not change, are left and
    returned second."""
    rows = await (
        await conn.execute(
            "SELECT datname FROM pg_database WHERE datallowconn AND datname <> current_database() "
            "AND has_database_privilege(%s, oid, 'CONNECT') ORDER BY datname",
            (role,),
        )
    ).fetchall()
    revoked, left = [], []
    for (database,) in rows:
        if only is not None and database not in only:
            left.append(database)  # not to be changed: the role may still connect to it
            continue
        try:
            await conn.execute(
                sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(
                    sql.Identifier(database)
                )
            )
        except psycopg.Error as exc:
            log.warning("PUBLIC keeps CONNECT on database %s: %s", database, exc)
        reach = await (
            await conn.execute("SELECT has_database_privilege(%s, %s, 'CONNECT')", (role, database))
        ).fetchone()
        (left if reach and reach[0] else revoked).append(database)
    return revoked, left


HOST_ROLES = "SELECT unnest(roles)::text FROM pg_policies WHERE tablename = 'procrastinate_jobs'"
BLOCKERS = f"""
SELECT DISTINCT h.pid, h.usename::text AS role FROM pg_stat_activity w
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid)
JOIN pg_stat_activity h ON h.pid = b.pid
WHERE w.datname = current_database() AND w.wait_event_type = 'Lock'
  AND w.query_start < now() - make_interval(secs => %(seconds)s)
  AND h.usename::text IN ({HOST_ROLES})
"""
CUT_OFF_SECONDS = 2.0  # a host's session that has kept anyone waiting on a lock this long is ended


async def cut_off_blockers(app: procrastinate.App, seconds: float = CUT_OFF_SECONDS) -> list[dict[str, Any]]:
    """End the sessions of hosts' roles that keep anyone of this database waiting on a lock for `seconds`
    (the API, or other hosts). Procrastinate's own work on a host holds a row for milliseconds; what is
    held longer (`LOCK TABLE procrastinate_workers`, a job's row kept `FOR UPDATE` in an open transaction)
    is a compromised host's, and would stop dispatch for every host. The host's worker, if it is honest,
    connects again. Needs the API's role to be a member of the hosts' roles (`make_worker_role` makes it
    one). Returns those ended, each logged with its role: the operator revokes that host."""
    ended = []
    for row in await app.connector.execute_query_all_async(BLOCKERS, seconds=seconds):
        try:
            done = await app.connector.execute_query_one_async(
                "SELECT pg_terminate_backend(%(pid)s) AS done", pid=row["pid"]
            )
        except Exception as exc:  # not a member of that role (the operator did not let the API be one)
            log.error("a session of %s blocks the job queue and cannot be ended: %s", row["role"], exc)
            continue
        if done and done["done"]:
            log.error(
                "ended a session of %s that kept the job queue waiting on a lock for over %.0f s; "
                "a worker host does not do that: revoke it if it does it again",
                row["role"],
                seconds,
            )
            ended.append(row)
    return ended


def role_url(url: str, role: str, password: str) -> str:
    """`url` (the API's database) with the workers' role and password instead of the API's."""
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{quote(role, safe='')}:{quote(password, safe='')}@{host}"))


async def _fleet() -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The capacity of each host that is up and not draining, and the runs in flight: running (on
    `host_id`), or handed to a host (`dispatched_to`) and not yet claimed. Two queries, whatever the fleet."""
    hosts = await WorkerHost.select(WorkerHost.host_id, WorkerHost.capacity).where(
        WorkerHost.lost_at.is_null() & (WorkerHost.draining.eq(False))
    )
    in_flight = await Run.select(Run.id, Run.company, Run.status, Run.host_id, Run.dispatched_to).where(
        (Run.status == RunStatus.running)
        | ((Run.status == RunStatus.queued) & Run.dispatched_at.is_not_null())
    )
    return {h["host_id"]: h["capacity"] for h in hosts}, in_flight


async def dispatch(app: procrastinate.App) -> list[int]:
    """Hand queued runs to the job queue while slots are free: companies in turn, none above its share
    (the slots divided among companies with work) while another company's runs wait, and none above
    `company_concurrency_cap` (0: no cap). Each goes to the host with the most free slots, into that host's
    queue, and the run records the host. Returns the runs handed over.

    A pass costs the same few round trips however many runs it hands out (it runs at every result, so its
    length bounds how fast a fleet's freed slots fill): the fleet, the waiting counts and the queue's head
    are read once, the jobs of every run of the head in one query, and the runs chosen are marked in one
    update and their jobs deferred in one insert."""
    capacity, in_flight = await _fleet()
    by_host = dict(capacity)
    held: Counter[int] = Counter()
    running: Counter[int] = Counter()
    for run in in_flight:
        is_running = run["status"] == RunStatus.running
        host = run["host_id"] if is_running else run["dispatched_to"]
        if host in by_host:
            by_host[host] -= 1
        held[run["company"]] += 1
        running[run["company"]] += is_running
    by_host = {host: n for host, n in by_host.items() if n > 0}
    handed_before = len(in_flight)
    free = sum(capacity.values()) - handed_before
    if free <= 0 or not by_host:
        return []
    pending = Counter(
        {
            row["company"]: row["count"]
            for row in await Run.select(Run.company, Count())
            .where((Run.status == RunStatus.queued) & Run.dispatched_at.is_null())
            .group_by(Run.company)
        }
    )
    if not pending:
        return []
    active = set(held) | set(pending)
    share = math.ceil(max(1, free + handed_before) / max(1, len(active)))
    cap = get_settings().company_concurrency_cap
    # at most `free` go now, each among its company's first `free` waiting runs; only runs handed over and not
    # yet claimed (fewer than `in_flight`) stand before them in the queue: so the order is read that far,
    # never the whole backlog
    head = [
        row
        for row in await queued_runs(limit=free + handed_before, running=dict(running))
        if row["dispatched_at"] is None  # not already handed over
    ]
    jobs = await _live_jobs(app, [row["id"] for row in head])
    chosen: list[tuple[int, str]] = []
    for row in head:
        if free <= 0 or not by_host:
            break
        run_id, company = row["id"], row["company"]
        others_wait = any(pending[c] > 0 for c in active if c != company)
        if (cap and held[company] >= cap) or (others_wait and held[company] >= share):
            continue
        if not await _retire_jobs(app, jobs.get(run_id, [])):
            continue  # a job of an earlier hand-over is still being worked on: once it ended
        host = min(by_host, key=lambda h: (-by_host[h], h))
        chosen.append((run_id, host))
        by_host[host] -= 1
        if by_host[host] <= 0:
            del by_host[host]
        held[company] += 1
        pending[company] -= 1
        free -= 1
    return await _hand_over(app, chosen)


LIVE_JOBS = """
SELECT id, status, queueing_lock FROM procrastinate_jobs
WHERE status IN ('todo', 'doing') AND task_name = %(task)s AND queueing_lock = ANY(%(locks)s)
"""  # procrastinate's index of the jobs that are todo or doing holds only those: the table's past is not read


async def _live_jobs(app: procrastinate.App, run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The jobs still waiting or being worked on (`todo`, `doing`) of each of `run_ids`, in one query."""
    if not run_ids:
        return {}
    by_lock = {lock_of(run_id): run_id for run_id in run_ids}
    rows = await app.connector.execute_query_all_async(LIVE_JOBS, task=TASK, locks=list(by_lock))
    jobs: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        jobs.setdefault(by_lock[row["queueing_lock"]], []).append(row)
    return jobs


async def _retire_jobs(app: procrastinate.App, jobs: list[dict[str, Any]]) -> bool:
    """Before a run is handed out (again), given its live jobs (`_live_jobs`): jobs of an earlier hand-over
    still waiting (`todo`: never taken, or waiting for a retry of their claim) are cancelled; False while
    one is being worked on (`doing`), so a run never has two live jobs. The run is not dispatched now, so
    no such job can claim it meanwhile."""
    clear = True
    for job in jobs:
        if job["status"] == "todo":
            if not await app.job_manager.cancel_job_by_id_async(job["id"]):
                clear = False  # taken just now
        else:
            clear = False
    return clear


MARK = """
UPDATE "run" SET "dispatched_at" = {}, "dispatched_to" = "chosen"."host"
FROM UNNEST({}::bigint[], {}::varchar[]) AS "chosen"("id", "host")
WHERE "run"."id" = "chosen"."id" AND "run"."status" = {} AND "run"."dispatched_at" IS NULL
RETURNING "run"."id"
"""


async def _hand_over(app: procrastinate.App, chosen: list[tuple[int, str]]) -> list[int]:
    """Mark the chosen runs with their hosts (one update; a run another API process handed over meanwhile
    is left out) and put their jobs in the hosts' queues (one insert). A run whose job appeared since
    `_live_jobs` is unmarked: the next pass looks again."""
    if not chosen:
        return []
    marked = {
        row["id"]
        for row in await Run.raw(
            MARK,
            datetime.now(UTC),
            [run_id for run_id, _ in chosen],
            [host for _, host in chosen],
            RunStatus.queued.value,
        )
    }
    chosen = [(run_id, host) for run_id, host in chosen if run_id in marked]
    jobs = [
        app.configure_task(TASK, queue=queue_of(host), queueing_lock=lock_of(run_id)).make_new_job(
            run_id=run_id
        )
        for run_id, host in chosen
    ]
    try:
        await app.job_manager.batch_defer_jobs_async(jobs)
        return [run_id for run_id, _ in chosen]
    except AlreadyEnqueued:  # one insert for all: none went in; each on its own finds which
        pass
    except Exception:
        await _unmark([run_id for run_id, _ in chosen])
        raise
    handed = []
    for index, (job, (run_id, _)) in enumerate(zip(jobs, chosen, strict=True)):
        try:
            await app.job_manager.defer_job_async(job)
        except AlreadyEnqueued:
            await _unmark([run_id])
            continue
        except Exception:
            await _unmark([run_id for run_id, _ in chosen[index:]])
            raise
        handed.append(run_id)
    return handed


async def _unmark(run_ids: list[int]) -> None:
    await Run.update({Run.dispatched_at: None, Run.dispatched_to: None}).where(Run.id.is_in(run_ids))


async def recover_stalled(app: procrastinate.App) -> list[int]:
    """Jobs left `doing` by a procrastinate worker whose heartbeat stopped (killed, or its database
    connection gone for `worker_lost_seconds`): procrastinate's stalled-job detection finds them. One whose
    run still waits for that job's host goes back to `todo` (`retry_job`: the host's worker, back, claims it
    once); one whose run ended, was handed elsewhere or was never claimed ends `failed`. A run a host holds
    (`running`) keeps its job: the host's own heartbeat settles that run (`service.reap`). Returns the jobs."""
    stalled = await app.job_manager.get_stalled_jobs(
        task_name=TASK, seconds_since_heartbeat=get_settings().worker_lost_seconds
    )
    recovered = []
    for job in stalled:
        run_id = job.task_kwargs.get("run_id")
        run = await Run.select(Run.status, Run.dispatched_to).where(Run.id == run_id).first()
        if run is not None and run["status"] == RunStatus.running:
            continue
        waits = (
            run is not None
            and run["status"] == RunStatus.queued
            and run["dispatched_to"] == host_of(job.queue)
        )
        assert job.id is not None
        try:
            if waits:
                await app.job_manager.retry_job(job)
            else:
                await app.job_manager.finish_job_by_id_async(job.id, Status.FAILED, delete_job=False)
        except ProcrastinateException as exc:  # moved meanwhile (its worker came back): theirs
            log.info("stalled job %s of run %s not recovered: %s", job.id, run_id, exc)
            continue
        log.warning(
            "job %s of run %s: its worker stopped; %s", job.id, run_id, "retried" if waits else "ended"
        )
        recovered.append(job.id)
    return recovered


class Dispatcher:
    """In the API processes of a fleet: dispatch on every approval and every `worker_heartbeat_seconds`,
    reap workers whose heartbeat stopped, fire due schedules and sweep retained bundles.

    With several API processes (`cleanroom serve --processes N`), one of them does it: the one holding the
    table `api_leader` locked (`LEADER_LOCK`) in a transaction it keeps open on a connection of its own. The
    others try again every heartbeat, so when the leader dies (its connection closes, PostgreSQL lets the
    lock go) another takes over within one. A table no worker host's role may lock, not an advisory key any
    role could take first (issue 52, D-M1); a table lock gives that transaction no transaction id, so
    leading for days holds back no vacuum.
    A run queued in a process that does not lead wakes the leader with a NOTIFY. What the loop does is also
    safe twice (conditional claims and ends, `_claim_firing`, procrastinate's queueing lock): a leader that
    lost its connection mid-pass finishes that pass beside its successor without doing anything twice."""

    def __init__(self) -> None:
        self.app: procrastinate.App | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._unlisten: Callable[[], None] | None = None
        self._last_schedules = -math.inf
        self._conn: psycopg.AsyncConnection | None = None
        self._notes: set[asyncio.Task[None]] = set()
        self.leading = False

    async def start(self) -> None:
        self.app = make_app()
        await ensure_schema(self.app)
        await self.app.open_async()
        loop = asyncio.get_running_loop()
        self._unlisten = queued.listen(lambda: loop.call_soon_threadsafe(self._queued))
        self._task = asyncio.create_task(self._lead())

    async def stop(self) -> None:
        if self._unlisten:
            self._unlisten()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await record_jobs.stop()  # a running import rolls back: its job ends failed, nothing applied
        if self.app is not None:
            await self.app.close_async()

    def _queued(self) -> None:
        """A run was queued in this process: wake the loop here, or the leading process."""
        self._wake.set()
        if not self.leading and self._conn is not None:
            task = asyncio.get_running_loop().create_task(self._notify(self._conn))
            self._notes.add(task)
            task.add_done_callback(self._notes.discard)

    @staticmethod
    async def _notify(conn: psycopg.AsyncConnection) -> None:
        try:
            await conn.execute(sql.SQL("NOTIFY {}").format(sql.Identifier(WAKE_CHANNEL)))
        except psycopg.Error:  # the leader's own pass, every heartbeat, finds the run anyway
            log.info("could not wake the dispatching API process", exc_info=True)

    async def _lead(self) -> None:
        """Wait for the leader lock, then dispatch for as long as the connection holding it lives. Until
        then the connection wakes the leader (`_notify`); once it holds the lock, in a transaction, it
        cannot hear (PostgreSQL delivers a NOTIFY between transactions): a second connection LISTENs."""
        while True:
            try:
                async with await api_connection(
                    autocommit=True,
                    application_name="cleanroom-api-dispatcher",
                    # its transaction stays open while it leads: a cluster-wide idle limit is not for it
                    extra="-c idle_in_transaction_session_timeout=0",
                ) as conn:
                    self._conn = conn
                    # polls PostgreSQL's lock (another process holds it): no event in this process to wait on
                    while not await self._take_lead(conn):  # noqa: ASYNC110
                        await asyncio.sleep(get_settings().worker_heartbeat_seconds)
                    self._conn = None
                    try:
                        log.info("this API process (pid %d) dispatches the fleet's runs", os.getpid())
                        self.leading = True
                        async with await api_connection(
                            autocommit=True, application_name="cleanroom-api-dispatcher-listen"
                        ) as ears:
                            await ears.execute(sql.SQL("LISTEN {}").format(sql.Identifier(WAKE_CHANNEL)))
                            await self._dispatch_while_held(conn, ears)
                    finally:
                        with contextlib.suppress(Exception):
                            await conn.rollback()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the dispatcher's connection failed; taking the lead again when it can")
            finally:
                self.leading, self._conn = False, None
            await asyncio.sleep(1.0)

    @staticmethod
    async def _take_lead(conn: psycopg.AsyncConnection) -> bool:
        """`api_leader` locked in a transaction left open (True), or the transaction ended (False: another
        process leads)."""
        await conn.execute("BEGIN")
        try:
            await conn.execute(LEADER_LOCK)
        except psycopg.errors.LockNotAvailable:
            await conn.rollback()
            return False
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.rollback()
            raise
        return True

    async def _dispatch_while_held(
        self, conn: psycopg.AsyncConnection, ears: psycopg.AsyncConnection
    ) -> None:
        """The loop; `ears` heard (its NOTIFYs wake the loop); the lock's connection asked every heartbeat
        whether it lives. When either connection ends, so does the loop: the lock is gone (or may be) and
        another process may lead."""

        async def hear() -> None:
            async for _ in ears.notifies():
                self._wake.set()

        async def hold() -> None:
            while True:
                await asyncio.sleep(get_settings().worker_heartbeat_seconds)
                await conn.execute("SELECT 1")  # in the lock's transaction: no snapshot kept between

        tasks = [
            asyncio.create_task(self._loop()),
            asyncio.create_task(hear()),
            asyncio.create_task(hold()),
            asyncio.create_task(self._guard()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in done:
            task.result()  # the connection's error, if that is what ended it
        raise RuntimeError("the leader lock's connection closed")

    async def _guard(self) -> None:
        """Beside the loop, not in it (a pass may be the one waiting): hosts that keep anyone waiting on a
        lock are cut off (`cut_off_blockers`)."""
        assert self.app is not None
        while True:
            await asyncio.sleep(REAP_EVERY_SECONDS)
            try:
                await cut_off_blockers(self.app)
            except Exception:
                log.exception("looking for hosts that block the job queue failed; trying again")

    async def _loop(self) -> None:
        assert self.app is not None
        loop = asyncio.get_running_loop()
        last_sweep = last_reap = -math.inf
        while True:
            try:
                # lost hosts and stalled jobs are judged in seconds: looked for at most once a second, not at
                # every result that wakes the loop to hand out the slot it freed
                if loop.time() - last_reap >= min(
                    REAP_EVERY_SECONDS, get_settings().worker_heartbeat_seconds
                ):
                    last_reap = loop.time()
                    await service.reap()
                    await recover_stalled(self.app)
                # due schedules queue runs, as the embedded worker
                if loop.time() - self._last_schedules > get_settings().schedule_check_seconds:
                    self._last_schedules = loop.time()
                    await schedules.fire_due()
                    records_sync.start_due_syncs()  # datasets synced from a company's database
                record_jobs.start_queued()  # imports and syncs people started (records/jobs.py)
                await dispatch(self.app)
                if loop.time() - last_sweep > 60 * get_settings().bundle_sweep_minutes:
                    last_sweep = loop.time()
                    await sweep_bundles()  # bundles past their retention, as the in-process worker does
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dispatching runs to workers failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), get_settings().worker_heartbeat_seconds)
            self._wake.clear()


DISPATCHER = Dispatcher()
