"""The job contract between the API and the fleet's hosts, shared by both sides: procrastinate's task name,
each host's own queue, how either side opens procrastinate's app, and the check a host makes of its own
database role before it starts. Both import it; it imports no table,
no service and no web framework, so a host's agent loads nothing of the API's with it. The API's side of the
queue (roles, dispatch, recovery) is `queue.py`."""

from __future__ import annotations

from typing import Any

import procrastinate
import psycopg

TASK = "cleanroom.run"
QUEUE = "runs"
JOBS, EVENTS, DEFERS, WORKERS = (
    "procrastinate_jobs",
    "procrastinate_events",
    "procrastinate_periodic_defers",
    "procrastinate_workers",
)


def queue_of(host_id: str) -> str:
    """The queue only `host_id`'s agent listens on (a valid host id keeps the NOTIFY channel short)."""
    return f"{QUEUE}.{host_id}"


def host_of(queue: str) -> str:
    return queue.removeprefix(f"{QUEUE}.")


def make_app(url: str, *, name: str, options: str = "") -> procrastinate.App:
    """`name` is the connections' application_name (`cleanroom-worker-<host>` on a host): an operator sees
    in pg_stat_activity who holds which connection; `options` (libpq's) carries the API's timeouts."""
    if not url.startswith(("postgres://", "postgresql://")):
        raise RuntimeError("workers in a fleet need PostgreSQL (DATABASE_URL=postgresql://…)")
    kwargs: dict[str, Any] = {"application_name": name}
    if options:
        kwargs["options"] = options
    connector = procrastinate.PsycopgConnector(conninfo=url, kwargs=kwargs)
    return procrastinate.App(connector=connector)


async def schema_ready(url: str) -> bool:
    """Whether procrastinate's tables are there (a host waits for the API to make them)."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
        return bool(row and row[0])


# --- a host checks its own role before it starts (`cleanroom worker --host-id`) ---------------------------


PRODUCT_REACH = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
  AND c.relname NOT LIKE 'procrastinate\\_%'
  AND has_schema_privilege(n.oid, 'USAGE')
  AND has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
ORDER BY c.relname
"""


def product_tables_reachable(url: str) -> list[str]:
    """The tables other than procrastinate's that the role of `url` may read or change: [] for a worker's
    role, every product table for the API's."""
    with psycopg.connect(url, connect_timeout=10) as conn:
        return [row[0] for row in conn.execute(PRODUCT_REACH).fetchall()]


ROLE_CHECK = """
SELECT has_database_privilege(current_database(), 'TEMP') AS temp,
       (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user) AS bypass,
       (SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class c
         WHERE c.relname = ANY(%(tables)s) AND c.relkind = 'r' AND NOT c.relrowsecurity) AS open_tables,
       (SELECT array_agg(qual) FROM pg_policies
         WHERE tablename = 'procrastinate_jobs' AND current_user = ANY(roles)) AS job_policies,
       (SELECT array_agg(policyname::text) FROM pg_policies
         WHERE tablename = ANY(%(tables)s) AND 'public' = ANY(roles)) AS public_policies,
       (SELECT array_agg(datname::text ORDER BY datname) FROM pg_database WHERE datallowconn
         AND datname <> current_database() AND has_database_privilege(oid, 'CONNECT')) AS other_databases
"""


def worker_role_problems(url: str, host_id: str) -> tuple[list[str], list[str]]:
    """Why the role of `url` is not host `host_id`'s own (`queue.make_worker_role`), and what it may still do
    that it should not but this host cannot change (connect to other databases of the cluster)."""
    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute(ROLE_CHECK, {"tables": [JOBS, EVENTS, DEFERS, WORKERS]}).fetchone()
    assert row is not None
    temp, bypass, open_tables, job_policies, public_policies, others = row
    problems = []
    if temp:
        problems.append("it may create temporary tables (TEMP): a host could fill the database's disk")
    if bypass:
        problems.append("it is a superuser or bypasses row-level security")
    if open_tables:
        problems.append(f"procrastinate's tables {', '.join(open_tables)} have no row-level security")
    if public_policies:
        problems.append(f"policies for PUBLIC on procrastinate's tables: {', '.join(public_policies)}")
    own = f"'{queue_of(host_id)}'"
    if not job_policies or any(own not in (qual or "") for qual in job_policies):
        problems.append(f"its jobs are not limited to this host's queue {queue_of(host_id)}")
    return problems, list(others or [])
