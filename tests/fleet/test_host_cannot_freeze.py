"""A compromised fleet host cannot stop the service through the database (issue 52, D-M1). Each test is the
host's attack, from its own role (`cleanroom workers db-role HOST`), beside the same statement by the API's
role or the honest worker's, which works: so a fix taken away would be seen.

- The API's locks: the four old advisory keys (schema 7311001, leader 7311002, audit chain 7311003, a
  run's charges 7311004/run) are held by the host, and the API proposes, approves, charges, leads and
  dispatches regardless; the locks the API takes now (rows of `api_lock`, the `api_leader` table) are
  refused to the host's role.
- Other hosts' jobs: seen, deleted, re-queued, finished, moved, rewritten, invented: none of it, while its
  own jobs are fetched and finished as procrastinate does.
- TEMP tables: refused.
- A host that locks procrastinate's table (which its DELETE privilege allows) is cut off, and dispatch
  goes on.
- The API's own connections carry a lock and a statement timeout.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg.errors import InsufficientPrivilege

from backend.audit.tables import AuditEntry
from backend.credits import service as credits
from backend.fleet import queue as fleet_queue
from backend.fleet.queue import Dispatcher
from backend.runs.tables import Run
from tests.support.fleet import _dispatch, _queued_run, _worker

pytestmark = pytest.mark.postgres
OLD_KEYS = (7_311_001, 7_311_002, 7_311_003)  # schema, leader, audit chain; charges: (7_311_004, run id)
WITHIN = 20.0  # seconds: what the API must finish in while the host holds its keys (it would wait for ever)


@pytest.fixture
async def hosts(client) -> AsyncIterator[dict[str, tuple[str, str]]]:
    """alpha's and beta's roles on this test's database (host -> (URL, role)), as `cleanroom workers db-role`
    makes them (the cluster's other databases left alone: they are the test suite's); dropped after."""
    api_url = fleet_queue.database_url()
    made = {}
    for host in ("alpha", "beta"):
        role, password = f"w_{uuid.uuid4().hex[:10]}_{host}", secrets.token_urlsafe(24)
        result = await fleet_queue.make_worker_role(api_url, host, password, role=role, other_databases=[])
        assert result.role == role and result.can_cut_off
        made[host] = (fleet_queue.role_url(api_url, role, password), role)
    yield made
    with psycopg.connect(api_url, autocommit=True) as admin:
        for _, role in made.values():
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


def _refused(conn: psycopg.Connection, statement: str, *args: object) -> None:
    with pytest.raises(InsufficientPrivilege), conn.transaction():
        conn.execute(statement, args or None)


async def test_a_host_holding_the_old_advisory_keys_freezes_nothing_and_may_take_none_of_the_new_locks(
    client, alice, acme_on, hosts
) -> None:
    first = await _queued_run(client, alice)
    await _worker(client, "alpha", capacity=2)
    api_url = fleet_queue.database_url()
    with psycopg.connect(hosts["alpha"][0], autocommit=True) as host:
        # the review's attack: every fixed key the API used, held for the session
        for key in OLD_KEYS:
            host.execute("SELECT pg_advisory_lock(%s)", (key,))
        host.execute("SELECT pg_advisory_lock(%s, %s)", (7_311_004, first["id"]))
        # control: the keys are really held (the API's role cannot have them): the old API would wait here
        with psycopg.connect(api_url, autocommit=True) as api:
            for key in OLD_KEYS:
                assert api.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (False,)

        # the locks the API takes now: no privilege on them
        _refused(host, "SELECT name FROM api_lock WHERE name = 'chain' FOR UPDATE")
        _refused(host, "SELECT name FROM api_lock WHERE name = 'schema' FOR UPDATE")
        _refused(host, "LOCK TABLE api_leader IN EXCLUSIVE MODE")
        _refused(host, "LOCK TABLE api_lock IN ACCESS EXCLUSIVE MODE")
        _refused(host, "INSERT INTO api_lock (name) VALUES (%s)", f"charge:{first['id']}")  # a run's charges

        # the API serves meanwhile: a proposal and its approval (audited writes: the chain's lock), a charge
        # (the run's charge lock), the lead (the leader's lock) and a dispatch, each within the time
        async def serve() -> tuple[int, list[int]]:
            second = await _queued_run(client, alice)
            owner = await Run.select(Run.company, Run.requested_by).where(Run.id == first["id"]).first()
            await credits.charge(
                company_id=owner["company"],
                user_id=owner["requested_by"],
                run_id=first["id"],
                run_title="t",
                vcpus=1,
                memory_mib=512,
                seconds=1.0,
                actor="system",
            )
            return second["id"], await _dispatch()

        second, handed = await asyncio.wait_for(serve(), WITHIN)
        assert sorted(handed) == sorted([first["id"], second])
        assert await AuditEntry.count().where(AuditEntry.action == "credits.charged") >= 1
        async with await fleet_queue.api_connection(autocommit=True) as one:
            assert await asyncio.wait_for(Dispatcher._take_lead(one), WITHIN)
            # control: the leader's lock is the API's to take, and exclusive: a second process does not lead
            async with await fleet_queue.api_connection(autocommit=True) as two:
                assert not await Dispatcher._take_lead(two)
            # leading holds back no vacuum: no transaction id, no snapshot kept while idle
            async with await fleet_queue.api_connection(autocommit=True) as look:
                row = await (
                    await look.execute(
                        "SELECT backend_xid, backend_xmin, state FROM pg_stat_activity WHERE pid = %s",
                        (one.info.backend_pid,),
                    )
                ).fetchone()
            assert row == (None, None, "idle in transaction")

    # control: the chain's row is the API's to lock, and one holder makes another wait (NOWAIT: refused)
    with psycopg.connect(api_url) as holder, psycopg.connect(api_url) as other:
        holder.execute("SELECT name FROM api_lock WHERE name = 'chain' FOR UPDATE")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute("SELECT name FROM api_lock WHERE name = 'chain' FOR UPDATE NOWAIT")


async def test_a_host_sees_and_changes_only_its_own_queues_jobs_and_makes_no_temporary_table(
    client, alice, acme_on, hosts
) -> None:
    runs = [await _queued_run(client, alice), await _queued_run(client, alice)]
    await _worker(client, "alpha", capacity=1)
    await _worker(client, "beta", capacity=1)
    assert sorted(await _dispatch()) == sorted(r["id"] for r in runs)
    api_url = fleet_queue.database_url()
    query = "SELECT id, queue_name, status::text, args, attempts FROM procrastinate_jobs ORDER BY id"
    with psycopg.connect(api_url, autocommit=True) as api:
        before = api.execute(query).fetchall()
    jobs = {row[1]: row[0] for row in before}
    assert set(jobs) == {"runs.alpha", "runs.beta"}
    theirs, mine = jobs["runs.beta"], jobs["runs.alpha"]

    with (
        psycopg.connect(hosts["alpha"][0], autocommit=True) as alpha,
        psycopg.connect(hosts["beta"][0], autocommit=True) as beta,
    ):
        beta_worker = beta.execute("SELECT * FROM procrastinate_register_worker_v1()").fetchone()[0]
        assert [r[1] for r in alpha.execute(query).fetchall()] == ["runs.alpha"]  # beta's job unseen
        # delete, re-queue, finish, cancel another host's job: nothing found to do it to
        assert alpha.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (theirs,)).rowcount == 0
        assert alpha.execute("UPDATE procrastinate_jobs SET status = 'todo'").rowcount == 1  # its own only
        for call in (
            "SELECT procrastinate_retry_job_v2(%s, now(), NULL, NULL, NULL)",
            "SELECT procrastinate_finish_job_v1(%s, 'failed', true)",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="not found"):
                alpha.execute(call, (theirs,))
        assert alpha.execute("SELECT procrastinate_cancel_job_v1(%s, false, true)", (theirs,)).fetchone() == (
            None,
        )
        assert alpha.execute(
            "SELECT id FROM procrastinate_fetch_job_v2(ARRAY['runs.beta'], NULL)"
        ).fetchone() == (None,)
        # its own job moved to beta's queue, rewritten, or a job invented: refused
        _refused(alpha, "UPDATE procrastinate_jobs SET queue_name = 'runs.beta' WHERE id = %s", mine)
        _refused(alpha, "UPDATE procrastinate_jobs SET lock = repeat('x', 1000) WHERE id = %s", mine)
        _refused(alpha, "UPDATE procrastinate_jobs SET args = '{\"run_id\": 1}' WHERE id = %s", mine)
        _refused(
            alpha,
            "INSERT INTO procrastinate_jobs (queue_name, task_name, args) VALUES ('runs.beta', %s, '{}')",
            fleet_queue.TASK,
        )
        _refused(alpha, "INSERT INTO procrastinate_events (job_id, type) VALUES (%s, 'started')", mine)
        # beta's worker row: not alpha's to end or age
        assert alpha.execute("DELETE FROM procrastinate_workers").rowcount == 0
        assert alpha.execute("UPDATE procrastinate_workers SET last_heartbeat = now()").rowcount == 0
        # the disk: no temporary tables
        _refused(alpha, "CREATE TEMP TABLE filler (x text)")

        # beta's job is as the API made it
        with psycopg.connect(api_url, autocommit=True) as api:
            assert [r for r in api.execute(query).fetchall() if r[0] == theirs] == [
                r for r in before if r[0] == theirs
            ]

        # positive control: each host takes and finishes its own job as procrastinate's worker does (its
        # triggers write the events), and keeps its own worker row beating
        alpha_worker = alpha.execute("SELECT * FROM procrastinate_register_worker_v1()").fetchone()[0]
        assert alpha.execute("UPDATE procrastinate_workers SET last_heartbeat = now()").rowcount == 1
        taking = ((alpha, alpha_worker, mine, "runs.alpha"), (beta, beta_worker, theirs, "runs.beta"))
        for conn, worker, job, queue in taking:
            fetched = conn.execute(
                "SELECT id, status::text FROM procrastinate_fetch_job_v2(ARRAY[%s], %s)", (queue, worker)
            ).fetchone()
            assert fetched == (job, "doing")
        with psycopg.connect(api_url, autocommit=True) as api:
            started = api.execute(
                "SELECT job_id FROM procrastinate_events WHERE type = 'started' ORDER BY job_id"
            ).fetchall()
        assert started == sorted([(mine,), (theirs,)])
        for conn, _, job, _ in taking:  # a finished job is deleted (its BEFORE DELETE trigger runs too)
            conn.execute("SELECT procrastinate_finish_job_v1(%s, 'succeeded', true)", (job,))
        assert beta.execute("DELETE FROM procrastinate_workers").rowcount == 1  # its own row
    with psycopg.connect(api_url, autocommit=True) as api:
        assert api.execute(query).fetchall() == []
        assert api.execute("SELECT count(*) FROM procrastinate_workers").fetchone() == (1,)  # alpha's


async def test_a_host_that_locks_the_job_queues_table_is_cut_off_and_dispatch_goes_on(
    client, alice, acme_on, hosts
) -> None:
    run = await _queued_run(client, alice)
    await _worker(client, "alpha", capacity=1)
    app = fleet_queue.make_app()
    await fleet_queue.ensure_schema(app)
    async with app.open_async():
        assert await fleet_queue.cut_off_blockers(app, seconds=0) == []  # nobody blocks: nobody ended
        host = psycopg.connect(hosts["alpha"][0], autocommit=True)
        try:
            host.execute("BEGIN")
            # its DELETE privilege (procrastinate deletes finished jobs) lets it lock the whole table
            host.execute("LOCK TABLE procrastinate_jobs IN ACCESS EXCLUSIVE MODE")
            dispatching = asyncio.ensure_future(fleet_queue.dispatch(app))
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                "application_name = 'cleanroom-api' AND wait_event_type = 'Lock'"
            )
            deadline = time.monotonic() + WITHIN
            async with await fleet_queue.api_connection(autocommit=True) as look:
                while (await (await look.execute(waiting)).fetchone())[0] == 0:
                    assert time.monotonic() < deadline, "the dispatch never reached the host's lock"
                    assert not dispatching.done(), dispatching
                    await asyncio.sleep(0.05)
            ended = await fleet_queue.cut_off_blockers(app, seconds=0)
            assert [row["role"] for row in ended] == [hosts["alpha"][1]]
            assert await asyncio.wait_for(dispatching, WITHIN) == [run["id"]]
            with pytest.raises(psycopg.OperationalError):
                host.execute("SELECT 1")
        finally:
            host.close()


async def test_the_apis_connections_carry_a_lock_and_a_statement_timeout(client, monkeypatch) -> None:
    """Whatever lock is held for ever (an operator's stray session, too), the API's statement fails after
    `db_lock_timeout_seconds` instead of waiting, and with it every writer behind it. Its pool (this test's
    loop's, started as the app starts it) and its own job-queue connections carry both settings."""
    from backend.settings import get_settings

    settings = get_settings()
    assert (settings.db_lock_timeout_seconds, settings.db_statement_timeout_seconds) == (10.0, 120.0)
    pooled = {r["name"]: r["setting"] for r in await Run.raw(SHOW)}
    assert pooled == {"lock_timeout": "10000", "statement_timeout": "120000"}  # ms
    async with await fleet_queue.api_connection() as conn:
        assert dict(await (await conn.execute(SHOW)).fetchall()) == pooled
    # a lock held elsewhere: the API's statement gives up after its lock_timeout (a short one here)
    monkeypatch.setattr(settings, "db_lock_timeout_seconds", 0.2)
    api_url = fleet_queue.database_url()
    with psycopg.connect(api_url) as holder:
        holder.execute("SELECT name FROM api_lock WHERE name = 'chain' FOR UPDATE")
        async with await fleet_queue.api_connection() as conn:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                await conn.execute("SELECT name FROM api_lock WHERE name = 'chain' FOR UPDATE")
    # control: the operator's own connections (the command line, a migration) carry no such limit
    with psycopg.connect(api_url) as plain:
        assert dict(plain.execute(SHOW).fetchall()) == {"lock_timeout": "0", "statement_timeout": "0"}
    assert settings.postgres_timeouts(migration=True) == {"lock_timeout": "0ms", "statement_timeout": "0ms"}


SHOW = (
    "SELECT name, setting FROM pg_settings WHERE name IN ('lock_timeout', 'statement_timeout') ORDER BY name"
)


async def test_a_hosts_role_loses_the_clusters_other_databases_and_has_few_connections(client) -> None:
    """PUBLIC's CONNECT (and TEMP) on the cluster's other databases let a host's role make temporary tables
    there, on the same disk: the role setup takes them back from every other database it may change (here
    one database of this test's own: the cluster's others are the test suite's)."""
    from tests.support.databases import POSTGRES_URL, _admin_sql, _with_db

    api_url = fleet_queue.database_url()
    other = f"t_other_{uuid.uuid4().hex[:10]}"
    role, password = f"w_{uuid.uuid4().hex[:10]}_alpha", secrets.token_urlsafe(24)
    await _admin_sql(f'CREATE DATABASE "{other}"')
    try:
        made = await fleet_queue.make_worker_role(api_url, "alpha", password, role=role, other_databases=[])
        assert other in made.connect_left  # control: by default PUBLIC, so the role, may connect to it
        elsewhere = fleet_queue.role_url(_with_db(POSTGRES_URL or "", other), role, password)
        with psycopg.connect(elsewhere) as conn:
            conn.execute("CREATE TEMP TABLE filler (x text)")
        made = await fleet_queue.make_worker_role(
            api_url, "alpha", password, role=role, other_databases=[other]
        )
        assert made.connect_revoked == [other] and other not in made.connect_left
        with pytest.raises(psycopg.OperationalError, match="permission denied"):
            psycopg.connect(elsewhere).close()
        with psycopg.connect(api_url, autocommit=True) as api:
            assert api.execute(
                "SELECT rolconnlimit FROM pg_roles WHERE rolname = %s", (role,)
            ).fetchone() == (fleet_queue.WORKER_CONNECTION_LIMIT,)
        # its own database still takes it
        with psycopg.connect(fleet_queue.role_url(api_url, role, password)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (role,)
    finally:
        await _admin_sql(f'DROP DATABASE IF EXISTS "{other}" WITH (FORCE)')
        with psycopg.connect(api_url, autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                admin.execute(f'DROP OWNED BY "{role}"')
                admin.execute(f'DROP ROLE "{role}"')
