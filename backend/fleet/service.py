"""The API's side of scale-out: enrollment tokens, signed URLs, worker hosts, and runs handed to workers.

A run travels: approved (queued) → `dispatch` hands it to one host's queue (companies in turn, at most
`company_concurrency_cap` of one company at once) and records that host → that host's worker `claim`s it
(queued → running, exactly once; any other host is refused) → fetches the bundle by a signed URL, re-hashes it against the approval → says its VM
starts (`vm_started`) → uploads the result by a signed URL, and the API files it exactly like the
in-process worker does (`backend.execution.execute`). `reap` notices a host whose heartbeat stopped: a run
whose VM had not started goes back to the queue, one whose VM had started ends `error` ("worker lost").
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from piccolo.columns import Column
from piccolo.columns.combination import WhereRaw

from backend import clock, filemodes
from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import AppError, Conflict, Forbidden, NotAuthenticated, NotFound
from backend.execution.execute import end_entry, end_unstarted, finish, keeps_bundle, record_result
from backend.fleet.results import revalidate
from backend.fleet.tables import WorkerHost, WorkerToken
from backend.flows import progress as flows
from backend.hashing import sha256_text
from backend.notify import service as notify
from backend.runs import gates, queued
from backend.runs.rows import whole_run
from backend.runs.tables import Run, RunStatus
from backend.sandbox.models import SandboxResult
from backend.settings import get_settings, valid_host_id
from backend.staging.bundle import remove_bundle

log = logging.getLogger("cleanroom.fleet")
TOKEN_PREFIX = "cwt_"
PURPOSES = ("bundle", "result", "carry")  # carry: what earlier steps of a flow hand this step
WORKER_LOST = "worker lost"


# --- enrollment tokens --------------------------------------------------------------------------------


MAX_CAPACITY = 256  # VMs one host may be offered at once


async def enroll(host_id: str, created_by: str, capacity: int | None = None) -> str:
    """A new enrollment token for `host_id`; the plain token is returned once, only its hash is kept.
    `capacity`: the most VMs at once its host is offered runs for (default `max_concurrent_vms`), the
    operator's word: what the host says when it registers is capped by it (`register`)."""
    _check_host_id(host_id)
    capacity = get_settings().max_concurrent_vms if capacity is None else capacity
    if not 1 <= capacity <= MAX_CAPACITY:
        raise AppError(f"a host's capacity is 1 to {MAX_CAPACITY} VMs", code="invalid")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    await WorkerToken.insert(
        WorkerToken(
            host_id=host_id,
            prefix=token[:10],
            token_hash=sha256_text(token),
            created_at=clock.now(),
            created_by=created_by,
            capacity=capacity,
        )
    )
    await audit.record(
        "worker.enrolled",
        actor=created_by,
        company_id=None,
        subject_type="worker",
        subject_id=host_id,
        data={"capacity": capacity},
    )
    return token


async def revoke(token_id: int, actor: str) -> dict[str, Any]:
    row = await WorkerToken.select().where(WorkerToken.id == token_id).first()
    if row is None:
        raise NotFound("no such worker token")
    await WorkerToken.update({WorkerToken.revoked: True}).where(WorkerToken.id == token_id)
    await audit.record(
        "worker.token_revoked",
        actor=actor,
        company_id=None,
        subject_type="worker",
        subject_id=row["host_id"],
        data={"token_id": token_id, "prefix": row["prefix"]},
    )
    return {**row, "revoked": True}


async def enroll_replacing(host_id: str, created_by: str) -> str:
    """A new enrollment token for `host_id` with every earlier live token of that host id revoked (each
    audited), in one transaction: `serve --with-worker` enrolls its `local` host so at every start, and the
    token of an earlier start (left in an old process's environment, a crash dump, a log) stops working.
    Tokens of other host ids are untouched."""
    async with audit.atomic():
        earlier = await WorkerToken.select(WorkerToken.id).where(
            (WorkerToken.host_id == host_id) & (WorkerToken.revoked.eq(False))
        )
        token = await enroll(host_id, created_by)
        for row in earlier:
            await revoke(row["id"], actor=created_by)
    return token


async def tokens() -> list[dict[str, Any]]:
    rows = await WorkerToken.select(
        WorkerToken.id,
        WorkerToken.host_id,
        WorkerToken.prefix,
        WorkerToken.created_at,
        WorkerToken.created_by,
        WorkerToken.last_used_at,
        WorkerToken.revoked,
    ).order_by(WorkerToken.id)
    return list(rows)


def _presented_token(header: str) -> str:
    scheme, _, token = (header or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX):
        raise NotAuthenticated("workers send 'Authorization: Bearer <worker enrollment token>'")
    return token


async def _host_of(row: dict[str, Any] | None) -> str:
    """The host id of a worker token's row (401 if there is none or it was revoked); its use noted."""
    if row is None or row["revoked"]:
        raise NotAuthenticated("this worker token is not valid (revoked or never issued)")
    if clock.last_used_is_stale(row["last_used_at"]):
        await WorkerToken.update({WorkerToken.last_used_at: clock.now()}).where(WorkerToken.id == row["id"])
    return row["host_id"]


async def host_for_token(header: str) -> str:
    """The host id an `Authorization: Bearer cwt_…` header enrolled; 401 for anything else (a person's
    session, the assistant's token, a revoked or unknown worker token)."""
    return (await enrolled(header))[0]


async def enrolled(header: str) -> tuple[str, int]:
    """`host_for_token`, and the capacity the operator enrolled that token with (a token made before
    capacities were set: the API's `max_concurrent_vms`)."""
    token = _presented_token(header)
    row = (
        await WorkerToken.select(
            WorkerToken.id,
            WorkerToken.host_id,
            WorkerToken.revoked,
            WorkerToken.last_used_at,
            WorkerToken.capacity,
        )
        .where(WorkerToken.token_hash == sha256_text(token))
        .first()
    )
    host_id = await _host_of(row)
    assert row is not None
    return host_id, row["capacity"] or get_settings().max_concurrent_vms


def _check_host_id(host_id: str) -> None:
    if not valid_host_id(host_id):
        raise AppError("a host id is 1-32 lower-case letters, digits or underscores", code="invalid")


# --- signed URLs --------------------------------------------------------------------------------------


def _key() -> bytes:
    """The signing key: 32 random bytes in the API's data directory (0600), made on first use."""
    path = get_settings().data_dir / "worker-url.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        return key if filemodes.new_private_file(path, key) else path.read_bytes()  # else: made meanwhile


def _signature(run_id: int, host_id: str, purpose: str, expires: int) -> str:
    message = f"{run_id}:{host_id}:{purpose}:{expires}".encode()
    return hmac.new(_key(), message, "sha256").hexdigest()


def signed_path(run_id: int, host_id: str, purpose: str) -> str:
    """`/api/worker/runs/<id>/<purpose>?expires=…&sig=…`: one run, one host, one purpose, for a while."""
    assert purpose in PURPOSES
    expires = int(time.time()) + get_settings().worker_url_seconds
    sig = _signature(run_id, host_id, purpose, expires)
    return f"/api/worker/runs/{run_id}/{purpose}?expires={expires}&sig={sig}"


def check_signature(run_id: int, host_id: str, purpose: str, expires: int, sig: str) -> None:
    if expires < time.time():
        raise Forbidden("this signed URL has expired")
    if not hmac.compare_digest(_signature(run_id, host_id, purpose, expires), sig or ""):
        raise Forbidden("this URL's signature does not match this run, host and purpose")


# --- hosts --------------------------------------------------------------------------------------------


async def register(
    host_id: str, *, libvirt_uri: str, virt_type: str, image_hash: str, capacity: int, enrolled_capacity: int
) -> int:
    """A worker (re)starts. Runs this host held before are from a previous life of it: those whose VM had
    not started go back to the queue, the others end `worker lost`. Returns how many were settled. The
    slots it is offered runs for are what it says (`capacity`: it may run fewer) within what the operator
    enrolled it with (`enrolled_capacity`): a host that says more gets no larger share of the queue."""
    now = clock.now()
    granted = max(1, min(capacity, enrolled_capacity))
    values = {
        WorkerHost.libvirt_uri: libvirt_uri[:200],
        WorkerHost.virt_type: virt_type[:10],
        WorkerHost.image_hash: image_hash[:64],
        WorkerHost.capacity: granted,
        WorkerHost.running: 0,
        WorkerHost.draining: False,
        WorkerHost.started_at: now,
        WorkerHost.last_heartbeat: now,
        WorkerHost.lost_at: None,
    }
    if await WorkerHost.exists().where(WorkerHost.host_id == host_id):
        await WorkerHost.update(values).where(WorkerHost.host_id == host_id)
    else:
        await WorkerHost.insert(WorkerHost(host_id=host_id, **{c._meta.name: v for c, v in values.items()}))
    settled = await _settle_runs_of(host_id, "the worker restarted")
    await _undispatch(host_id)  # its queue's jobs may be gone with its last life: hand them out again
    queued.announce()  # its slots are free (and its runs may be back in the queue): dispatch now, not at the next pass
    await audit.record(
        "worker.registered",
        actor=audit.host_actor(host_id),
        company_id=None,
        subject_type="worker",
        subject_id=host_id,
        data={
            "virt_type": virt_type,
            "image_hash": image_hash,
            "capacity": granted,
            **({"capacity_asked": capacity} if capacity != granted else {}),
            "settled_runs": settled,
        },
    )
    return settled


# A heartbeat in one statement (the fleet runs on PostgreSQL only): the token's row, the host's row touched while
# the token stands and the host is not lost, and the runs the database says the host holds. Every host sends one
# every few seconds: as three queries this was most of what the API spent on a fleet at rest (docs/scale.md).
_BEAT = f"""
WITH token AS (
    SELECT id, host_id, revoked, last_used_at FROM {WorkerToken._meta.tablename} WHERE token_hash = {{}}
), beat AS (
    UPDATE {WorkerHost._meta.tablename} SET last_heartbeat = {{}}, running = {{}}, draining = {{}}
    WHERE host_id = (SELECT host_id FROM token WHERE NOT revoked) AND lost_at IS NULL
    RETURNING 1
)
SELECT token.id, token.host_id, token.revoked, token.last_used_at, EXISTS (SELECT 1 FROM beat) AS beat,
    ARRAY (
        SELECT run.id FROM {Run._meta.tablename} AS run
        WHERE run.host_id = token.host_id AND run.status = {{}} AND run.started_at < {{}}
    ) AS held
FROM token
"""


async def heartbeat(
    authorization: str, *, running: int, draining: bool, holding: list[int] | None = None
) -> None:
    """The host of the `Authorization` header is alive, runs `running` VMs and holds `holding` (None: it did
    not say). Refused as `host_for_token` refuses; 409 for a host not registered or declared lost."""
    token = _presented_token(authorization)
    now = clock.now()
    held_since = now - timedelta(seconds=get_settings().worker_claim_seconds)
    rows = await WorkerToken.raw(
        _BEAT, sha256_text(token), now, max(0, running), draining, RunStatus.running.value, held_since
    )
    host_id = await _host_of(rows[0] if rows else None)
    if not rows[0]["beat"]:
        raise Conflict("this host is not registered (or was declared lost): register again")
    if holding is not None:
        await _settle_unheld(host_id, set(rows[0]["held"]) - set(holding))


async def _settle_unheld(host_id: str, unheld: set[int]) -> None:
    """Runs this host holds by the database and no longer by its own word (a claim whose answer never
    reached it, a run whose result it gave up sending), claimed longer than `worker_claim_seconds` ago: back
    to the queue if their VM never started, else ended as lost. The bound spares a claim still on its way."""
    for run_id in sorted(unheld):
        log.warning("run %s: %s no longer holds it", run_id, host_id)
        await _settle_runs_of(host_id, "the worker no longer holds it", run_id=run_id)


async def leave(host_id: str) -> None:
    await WorkerHost.update(
        {WorkerHost.lost_at: clock.now(), WorkerHost.running: 0, WorkerHost.draining: True}
    ).where(WorkerHost.host_id == host_id)
    await _settle_runs_of(host_id, "the worker stopped")
    await _undispatch(host_id)
    queued.announce()  # what it held and had not started is queued again
    await audit.record(
        "worker.left",
        actor=audit.host_actor(host_id),
        company_id=None,
        subject_type="worker",
        subject_id=host_id,
    )


async def hosts() -> list[dict[str, Any]]:
    """Every worker host with its heartbeat age and how many runs wait for a slot."""
    now = clock.now()
    rows = await WorkerHost.select().order_by(WorkerHost.host_id)
    for row in rows:
        row["heartbeat_age_seconds"] = round((now - row["last_heartbeat"]).total_seconds(), 1)
        row["up"] = row["lost_at"] is None
    return list(rows)


# --- runs ---------------------------------------------------------------------------------------------


# The company's switches (the first two of `gates.gate_problem`) as a condition of the claim itself: a switch
# turned off before the claim's commit refuses it, whether or not the switch's own cancelling reached the run yet
_SWITCHES_ON = (
    'EXISTS (SELECT 1 FROM "company" WHERE "company"."id" = "run"."company" '
    'AND "company"."assistant_write_enabled" AND "company"."code_execution_enabled")'
)


async def claim(host_id: str, run_id: int) -> dict[str, Any]:
    """queued → running for this host, exactly once, and only if the run was dispatched to this host; what
    the worker needs to run it (no bundle path: the bundle comes by the signed URL). The host's being
    registered and not lost, and the company's switches being on, are conditions of the same statement;
    asked apart only when the claim fails. The gates are those the embedded worker checks before a VM starts
    (`gates.gate_problem`): a run whose gate closed since its approval (a switch turned off, a pool used up)
    ends `cancelled` with the reason, audited, and the host is told 409 `run_cancelled`."""
    now = clock.now()
    claimed = (
        await Run.update(
            {Run.status: RunStatus.running, Run.host_id: host_id, Run.started_at: now, Run.updated_at: now}
        )
        .where(
            (Run.id == run_id)
            & (Run.status == RunStatus.queued)
            & (Run.dispatched_to == host_id)
            & WhereRaw(
                'EXISTS (SELECT 1 FROM "worker_host" WHERE "worker_host"."host_id" = {} '
                'AND "worker_host"."lost_at" IS NULL)',
                host_id,
            )
            & WhereRaw(_SWITCHES_ON)
        )
        .returning(Run.id, Run.company, Run.bundle_dir)
    )
    if not claimed:
        host = await WorkerHost.select(WorkerHost.lost_at).where(WorkerHost.host_id == host_id).first()
        if host is None or host["lost_at"] is not None:
            raise Conflict("this host is not registered (or was declared lost): register again")
        row = (
            await Run.select(
                Run.id,
                Run.company,
                Run.status,
                Run.host_id,
                Run.vm_started_at,
                Run.dispatched_to,
                Run.bundle_dir,
            )
            .where(Run.id == run_id)
            .first()
        )
        if row is not None and row["status"] == RunStatus.queued:
            if row["dispatched_to"] == host_id and (problem := await gates.gate_problem(row["company"])):
                await _cancel_unstarted(row, problem, (Run.dispatched_to == host_id) & Run.host_id.is_null())
            raise Forbidden("this run was not dispatched to this host")
        ours = row is not None and row["status"] == RunStatus.running and row["host_id"] == host_id
        if ours and row["vm_started_at"] is None:
            # this host claimed it and the answer never reached it (the connection dropped after the
            # update): the job again. Only one of this host's attempts passes `vm_started`.
            return await _job(host_id, run_id)
        raise Conflict("this run is not waiting to start (another worker holds it, or it ended)")
    # the switches were on (a condition of the claim): the gate left is the pool, by the same rule
    if problem := await credits.blocked_reason(claimed[0]["company"], holds=False):
        row = {**claimed[0], "status": RunStatus.running}
        await _cancel_unstarted(row, problem, (Run.host_id == host_id) & Run.vm_started_at.is_null())
    try:
        return await _job(host_id, run_id)
    except Exception:  # the worker gets a 5xx and tries the claim again: the run must still be claimable
        await Run.update(
            {
                Run.status: RunStatus.queued,
                Run.host_id: None,
                Run.started_at: None,
                Run.updated_at: clock.now(),
            }
        ).where(
            (Run.id == run_id)
            & (Run.status == RunStatus.running)
            & (Run.host_id == host_id)
            & Run.vm_started_at.is_null()
        )
        raise


async def _cancel_unstarted(row: dict[str, Any], problem: str, only_if: Any) -> None:
    """End a run this host was about to start, whose company's gate is closed (`problem`), as `cancelled`
    (`gates.cancel_unstarted`: its entry, its bundle gone, its flow stopped), and refuse the claim 409 with
    the reason. Raises Conflict either way: if the run moved meanwhile, the claim is refused as for any
    run not waiting to start."""
    if await gates.cancel_unstarted(row, problem, actor=audit.run_actor(row["id"]), only_if=only_if):
        queued.announce()  # its slot is free
        raise Conflict(f"this run was cancelled before it started: {problem}", code="run_cancelled")
    raise Conflict("this run is not waiting to start (another worker holds it, or it ended)")


async def _job(host_id: str, run_id: int) -> dict[str, Any]:
    run = await whole_run(run_id)
    carry_url, started_after = None, None
    if run["flow_id"] is not None:  # a flow's step: what earlier steps handed on, fetched by its own URL
        _, started_after = await flows.carry_in(run)
        carry_url = signed_path(run_id, host_id, "carry")
    return {
        "run_id": run_id,
        "carry_url": carry_url,
        "started_after": started_after,
        "code": run["code"],
        "code_sha256": run["code_sha256"],
        "approved_code_sha256": run["approved_code_sha256"],
        "approved_bundle_sha256": run["approved_bundle_sha256"],
        "approved_at": run["approved_at"].isoformat() if run["approved_at"] else None,
        "manifest": run["manifest"],
        "limits": run["limits"],
        "read_actions": run["read_actions"],
        "bundle_url": signed_path(run_id, host_id, "bundle"),
        "result_url": signed_path(run_id, host_id, "result"),
        "request_id": run["request_id"],  # the host logs the run under the proposing request's id
    }


async def held_run(host_id: str, run_id: int, *columns: Column) -> dict[str, Any]:
    """The run (all of it, or only `columns`), if this host holds it now (running, claimed by it); 403
    otherwise."""
    if columns:
        run = (
            await Run.select(*columns, Run.host_id, Run.status)
            .where(Run.id == run_id)
            .output(load_json=True)
            .first()
        )
    else:
        run = await whole_run(run_id)
    if run is None or run["host_id"] != host_id or run["status"] != RunStatus.running:
        raise Forbidden("this worker does not hold this run")
    return run


async def vm_started(host_id: str, run_id: int) -> None:
    """From here on the run is never started again: a lost worker means `error`, not a retry. Once: a
    second attempt of the same host (a claim answered twice) is refused, so one VM runs the run. Holding
    the run is a condition of the same statement, which returns the company for the entry; why it failed
    is asked apart only when it did."""
    async with audit.atomic():  # the start and `run.started` land together, or neither
        started = (
            await Run.update({Run.vm_started_at: clock.now()})
            .where(
                (Run.id == run_id)
                & (Run.host_id == host_id)
                & (Run.status == RunStatus.running)
                & Run.vm_started_at.is_null()
            )
            .returning(Run.company)
        )
        if started:
            await audit.record(
                "run.started",
                actor=audit.host_actor(host_id),
                company_id=started[0]["company"],
                subject_type="run",
                subject_id=run_id,
                data={"host_id": host_id},
            )
    if not started:
        await held_run(host_id, run_id, Run.id)  # 403 when this host does not hold it
        raise Conflict("this run's VM was started already")


async def refuse(host_id: str, run_id: int, problem: str) -> None:
    """The worker found the bundle or code differ from the approval: the run never starts."""
    run = await held_run(host_id, run_id)
    await end_unstarted(run, RunStatus.error, "run.refused", "refused to start", problem=problem[:500])
    queued.announce()  # its slot is free


async def record(
    host_id: str, run_id: int, result: SandboxResult, out_dir: Path, *, arrived_at: datetime | None = None
) -> str:
    """File what a worker brought back, exactly as the in-process worker does, once it was re-checked
    against the output policies (`results.revalidate`): a worker host is no more trusted than a guest.
    The run is charged for the time on the API's clock from its VM's start (`vm_started`; the claim, if the
    host never said it) to its result's arrival (`arrived_at`, when the upload began; default now), never
    for the timings the host reports."""
    run = await held_run(host_id, run_id)
    result = await asyncio.to_thread(revalidate, result, out_dir, read_actions=bool(run["read_actions"]))
    status = await record_result(run, result, out_dir, seconds=api_seconds(run, arrived_at or clock.now()))
    if not keeps_bundle(status) or run["flow_id"] is not None:  # as the in-process worker does
        await asyncio.to_thread(remove_bundle, run["bundle_dir"])
    if run["flow_id"] is not None:
        await asyncio.to_thread(shutil.rmtree, flows.carry_dir(run), True)
    # its slot is free: the next queued run is handed out now. Before, only a new approval or the dispatcher's
    # pass every heartbeat did it, so a fleet with a backlog ran its slots' worth per heartbeat at most
    queued.announce()
    return status


def api_seconds(run: dict[str, Any], arrived_at: datetime) -> float:
    """How long a fleet run ran by the API's clock: from its VM's start (the claim, when the host never
    said) to its result's arrival. What the host reports (`timings_ms`) is its own word, and not billed."""
    began = run["vm_started_at"] or run["started_at"] or arrived_at
    return max(0.0, (arrived_at - began).total_seconds())


async def release(host_id: str, run_id: int, problem: str) -> str:
    """A worker failed with a run it holds (not the run's fault)."""
    await held_run(host_id, run_id, Run.id)
    await _settle_runs_of(host_id, f"the worker failed: {problem[:300]}", run_id=run_id)
    queued.announce()  # its slot is free, and the run is queued again if its VM never started
    row = await Run.select(Run.status).where(Run.id == run_id).first()
    return row["status"]


async def _settle_runs_of(host_id: str, why: str, *, run_id: int | None = None) -> int:
    """Runs this host held: back to the queue if their VM never started, else `error` (worker lost)."""
    still_held = (Run.host_id == host_id) & (Run.status == RunStatus.running)
    where = still_held if run_id is None else still_held & (Run.id == run_id)
    held = await Run.select(Run.id, Run.company, Run.vm_started_at, Run.bundle_dir).where(where)
    for row in held:
        if row["vm_started_at"] is None:
            async with audit.atomic():  # back in the queue and its entry: both or neither
                requeued = (
                    await Run.update(
                        {
                            Run.status: RunStatus.queued,
                            Run.host_id: None,
                            Run.started_at: None,
                            Run.dispatched_at: None,
                            Run.dispatched_to: None,
                            Run.updated_at: clock.now(),
                        }
                    )
                    .where(still_held & (Run.id == row["id"]) & Run.vm_started_at.is_null())
                    .returning(Run.id)
                )
                if requeued:
                    await audit.record(
                        "run.requeued",
                        actor="worker:reaper",
                        company_id=row["company"],
                        subject_type="run",
                        subject_id=row["id"],
                        data={"host_id": host_id, "reason": why},
                    )
        else:
            lost = end_entry("run.worker_lost", "worker:reaper", row, {"host_id": host_id, "reason": why})
            await finish(  # only if still held: a result that landed meanwhile is not overwritten
                row["id"],
                RunStatus.error,
                entry=lost,
                only_if=still_held,
                error_message=f"{WORKER_LOST}: {why} ({host_id})",
            )
    return len(held)


async def _undispatch(host_id: str | None = None, *, before: datetime | None = None) -> list[int]:
    """Runs handed to `host_id` (or to any host, longer ago than `before`) that no worker claimed: back to
    the dispatcher, which hands them out again. A job for one of them that still reaches a worker later is
    refused at its claim (the run went to another host, or was claimed from another job)."""
    where = (Run.status == RunStatus.queued) & Run.dispatched_at.is_not_null()
    if host_id is not None:
        where = where & (Run.dispatched_to == host_id)
    if before is not None:
        where = where & (Run.dispatched_at < before)
    rows = await Run.update({Run.dispatched_at: None, Run.dispatched_to: None}).where(where).returning(Run.id)
    return [r["id"] for r in rows]


async def reap() -> list[str]:
    """Hosts whose heartbeat is older than `worker_lost_seconds` are lost; their runs are settled. A run
    handed to a host that did not claim it within `worker_claim_seconds` (its job lost on the way, its worker
    killed between taking the job and claiming, the claim failing past its retries) is handed out again."""
    settings = get_settings()
    cutoff = clock.now() - timedelta(seconds=settings.worker_lost_seconds)
    if stale := await _undispatch(before=clock.now() - timedelta(seconds=settings.worker_claim_seconds)):
        log.warning("runs %s were not claimed where they were sent: handing them out again", stale)
    stale = await WorkerHost.select(WorkerHost.host_id).where(
        (WorkerHost.last_heartbeat < cutoff) & WorkerHost.lost_at.is_null()
    )
    lost = []
    for row in stale:
        host_id = row["host_id"]
        marked = (
            await WorkerHost.update({WorkerHost.lost_at: clock.now()})
            .where((WorkerHost.host_id == host_id) & WorkerHost.lost_at.is_null())
            .returning(WorkerHost.id)
        )
        if not marked:
            continue
        log.warning("worker %s lost: no heartbeat for %ss", host_id, get_settings().worker_lost_seconds)
        held = await Run.select(Run.id, Run.company).where(
            (Run.host_id == host_id) & (Run.status == RunStatus.running)
        )
        await _settle_runs_of(host_id, "its heartbeat stopped")
        await _undispatch(host_id)
        await audit.record(
            "worker.lost", actor="worker:reaper", company_id=None, subject_type="worker", subject_id=host_id
        )
        await _tell_lost(host_id, held)
        lost.append(host_id)
    return lost


async def _tell_lost(host_id: str, held: list[dict[str, Any]]) -> None:
    """A host was lost: the operator (settings `notify_operator_emails`) is told, and so are the admins of
    every company whose runs it held, with their own runs only (its id is the operator's, not theirs)."""
    await notify.emit(
        notify.Notice(
            event="worker.lost", company_id=None, subject_type="worker", subject_id=host_id, path="/health"
        ),
        operator=True,
    )
    by_company: dict[int, list[int]] = {}
    for row in held:
        by_company.setdefault(row["company"], []).append(row["id"])
    for company, runs in sorted(by_company.items()):
        notice = notify.Notice(
            event="worker.lost",
            company_id=company,
            subject_type="worker",
            subject_id=None,
            path=f"/runs/{runs[0]}" if len(runs) == 1 else "/runs",
            runs=tuple(sorted(runs)),
        )
        await notify.emit(notice, await notify.admins(company))
