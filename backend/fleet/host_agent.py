"""`cleanroom worker --host-id NAME`: the host agent, one process per hypervisor host, taking run jobs from
procrastinate.

It reaches the job queue with its host's own PostgreSQL role (`cleanroom workers db-role HOST`: procrastinate's
tables only, never the product's, its rows limited to its own host's queue) and takes jobs from that queue. It needs no shared
filesystem with the API: it claims a run over HTTP with its enrollment token (only a run dispatched to
this host), fetches the staged bundle by the signed URL it got, re-hashes code and bundle against the
approval before any VM exists (a mismatch refuses the run), runs it in a fresh VM here, and sends the
result and output files back by another signed URL; the API re-validates that result as hostile input.
It is a client and nothing else: it speaks the API only through `HostClient` (host_client.py), shares the job
contract through `jobs.py`, checks and runs the job through `runs/approved.py`, and loads no table, no
service and no web framework (tests/fleet/test_host_agent_startup.py). It registers itself at start (after removing only this host's leftover domains) and sends a heartbeat
every `worker_heartbeat_seconds`; SIGTERM drains (running VMs finish, no new job is taken), then it leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import httpx
import procrastinate
import psycopg
from procrastinate.exceptions import ProcrastinateException
from procrastinate.jobs import Status

from backend import filemodes, observe
from backend.fleet import transfer
from backend.fleet.host_client import ApiUnavailable, HostClient, HostRefused
from backend.fleet.jobs import TASK, make_app, queue_of, schema_ready
from backend.fleet.schemas import HeartbeatBody, HostBody, Job
from backend.runs.approved import ApprovedJob, check, run_approved
from backend.settings import get_settings

__all__ = ["CLAIM_RETRY", "ApiUnavailable", "ClaimFailed", "HostAgent", "run_host_agent"]

log = logging.getLogger("cleanroom.fleet.host")
BUNDLE_MAX_MEMBERS = 100_000
# the job loop's backoff when the job queue is unreachable: doubling from the first wait to the longest; a
# worker that had run this long before it failed starts again from the first wait
RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS, WORKED_WELL_SECONDS = 1.0, 30.0, 60.0


REGISTER_BACKOFF_FIRST_SECONDS, REGISTER_BACKOFF_MAX_SECONDS = 1.0, 30.0


class ClaimFailed(RuntimeError):
    """The API answered the claim with a server error: nothing was claimed, the job is tried again."""


# A claim that failed (the API unreachable past RETRIES, a 5xx) is procrastinate's to retry: the job goes back
# to `todo` and is taken again in 2, 4, 8, 16 s. Only the claim: once a run is claimed, `_run` settles every
# failure over HTTP itself and the job ends; the claim is conditional, so a retry never starts a run twice.
# Past these attempts the job ends `failed` and the API hands the run out again (`worker_claim_seconds`).
CLAIM_RETRY = procrastinate.RetryStrategy(
    max_attempts=4, exponential_wait=2, retry_exceptions={ApiUnavailable, ClaimFailed}
)


class HostAgent:
    """`http`: the connection to the API (a test's or a bench's transport); by default one to `api_url`."""

    def __init__(
        self, *, host_id: str, api_url: str, token: str, capacity: int, http: httpx.AsyncClient | None = None
    ) -> None:
        self.host_id, self.capacity = host_id, capacity
        self.api = HostClient(http, token) if http is not None else HostClient.to(api_url, token)
        self.running = 0
        self.holding: set[int] = set()  # runs with a job in this process, from the claim to the result sent
        self.draining = False
        self._stop = asyncio.Event()
        self._warm = False

    # --- life ----------------------------------------------------------------------------------------

    async def register(self) -> None:
        from backend import sandbox
        from backend.sandbox.image import current_image
        from backend.sandbox.virt import resolve_virt_type

        filemodes.prepare_data_dir()  # this host's run directory, passable by its guests' uids
        removed = await asyncio.to_thread(sandbox.recover_leftovers)  # this host's names only
        if removed:
            log.info("removed %d leftovers of this host", len(removed))
        if get_settings().use_saved_state and not self._warm:  # this host's own slots: warm before any job
            from backend.sandbox.templates import prepare_saved_states

            made = await asyncio.to_thread(prepare_saved_states, lambda message: log.info("%s", message))
            log.info("saved warm states of host %s ready (%d made)", self.host_id, made)
            self._warm = True
        image = current_image()
        virt = resolve_virt_type(image) if image else ""
        await self.api.register(
            HostBody(
                libvirt_uri=get_settings().libvirt_uri,
                virt_type=virt,
                image_hash=image.image_hash if image else "",
                capacity=self.capacity,
            )
        )
        log.info("host %s registered (capacity %d)", self.host_id, self.capacity)

    async def _heartbeats(self) -> None:
        while True:
            try:
                try:
                    await self.api.heartbeat(
                        HeartbeatBody(
                            running=self.running, draining=self.draining, holding=sorted(self.holding)
                        )
                    )
                except HostRefused as refused:
                    if refused.status != 409:
                        raise
                    await self.register_until_done()  # declared lost while we were away: start over
            except httpx.HTTPError as exc:
                # httpx's timeouts and closed connections say nothing in their text: the kind says what
                log.warning("heartbeat failed: %s%s", type(exc).__name__, f": {exc}" if str(exc) else "")
            except Exception:  # the heartbeat outlives any one failure: a host that stops beating is lost
                log.exception("heartbeat failed")
            await asyncio.sleep(get_settings().worker_heartbeat_seconds)

    async def register_until_done(self) -> None:
        """`register` again, with backoff, until it succeeds or this host is told to stop. libvirtd being
        restarted (the warm states cannot be made) or the API away past the retries is a moment, not a reason
        to end the host: before, the first ended the process and the second, after a heartbeat's 409, ended
        the heartbeat task while the host went on taking jobs, lost for good."""
        delay = REGISTER_BACKOFF_FIRST_SECONDS
        while True:
            try:
                await self.register()
                return
            except Exception as exc:
                refused = isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code < 500
                if refused or self._stop.is_set():
                    raise  # the API said no (a revoked token, a bad request): trying again will not help
                log.warning("registration of host %s failed (%s); again in %.0fs", self.host_id, exc, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                delay = min(delay * 2, REGISTER_BACKOFF_MAX_SECONDS)

    async def _wait_for_schema(self, url: str) -> None:
        """The API makes procrastinate's tables; this host's role may not (it creates nothing)."""
        delay = 1.0
        while not await schema_ready(url):
            log.warning(
                "the job queue's tables are not there yet (the API makes them); again in %.0fs", delay
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30)

    async def serve(self) -> None:
        url = get_settings().effective_database_url
        app = make_app(url, name=f"cleanroom-worker-{self.host_id}")
        await self._wait_for_schema(url)
        self.register_task(app)
        await self.register_until_done()
        await self._end_previous_life(app)
        beats = asyncio.create_task(self._heartbeats())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._drain)
        try:
            await self._take_jobs(app)
        finally:
            beats.cancel()
            with contextlib.suppress(httpx.HTTPError, ApiUnavailable):
                await self.api.leave()
            await self.api.aclose()
            log.info("host %s stopped", self.host_id)

    async def _end_previous_life(self, app: procrastinate.App) -> list[int]:
        """Jobs of this host's queue still `doing` as the process starts belong to its previous life (killed
        mid-job): `register` has just settled their runs (ended `worker lost`, or back to the dispatcher), so
        they end `failed` now. Left alone, they stayed `doing` until procrastinate noticed the old worker's
        silence `worker_lost_seconds` later; an API stopped before then kept them `doing` for good, and a run
        sent back to the queue could not be handed out again meanwhile (`queue._retire_jobs`). A host id is one
        process at a time; this runs before the process takes any job. The API's `recover_stalled` stays the
        fallback when this fails. Returns the jobs ended."""
        ended: list[int] = []
        try:
            async with app.open_async():
                for job in await app.job_manager.list_jobs_async(
                    queue=queue_of(self.host_id), status="doing"
                ):
                    if job.id is None:
                        continue
                    with contextlib.suppress(ProcrastinateException):  # moved meanwhile: not ours to end
                        await app.job_manager.finish_job_by_id_async(job.id, Status.FAILED, delete_job=False)
                        ended.append(job.id)
        except (ProcrastinateException, psycopg.Error, OSError) as exc:
            log.warning("jobs of this host's previous life not ended (the API's stall check will): %s", exc)
        if ended:
            log.warning(
                "jobs %s of this host's previous life ended: their runs were settled at registration", ended
            )
        return ended

    def register_task(self, app: procrastinate.App) -> None:
        app.task(name=TASK, queue=queue_of(self.host_id), pass_context=False, retry=CLAIM_RETRY)(self.handle)

    async def _take_jobs(self, app: Any) -> None:
        """Procrastinate's worker until SIGTERM; a lost database connection is retried with backoff (a job
        already claimed goes on over HTTP meanwhile; one not yet fetched stays in the queue)."""
        delay = RETRY_FIRST_SECONDS
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            began = loop.time()
            try:
                async with app.open_async():
                    worker = asyncio.create_task(
                        app.run_worker_async(
                            queues=[queue_of(self.host_id)],  # this host's jobs only
                            concurrency=self.capacity,
                            install_signal_handlers=False,
                            wait=True,
                            shutdown_graceful_timeout=None,  # running VMs finish
                            delete_jobs="successful",
                            # procrastinate's own heartbeat, on the same clock as the API's: the jobs of a
                            # worker silent for worker_lost_seconds are stalled (`queue.recover_stalled`)
                            update_heartbeat_interval=get_settings().worker_heartbeat_seconds,
                            stalled_worker_timeout=get_settings().worker_lost_seconds,
                        )
                    )
                    stop = asyncio.create_task(self._stop.wait())
                    await asyncio.wait({worker, stop}, return_when=asyncio.FIRST_COMPLETED)
                    if not worker.done():
                        worker.cancel()  # procrastinate: stop fetching, wait for the running jobs
                        with contextlib.suppress(asyncio.CancelledError):
                            await worker
                        return
                    stop.cancel()
                    worker.result()  # raises what stopped it
                    # Procrastinate also stops by itself, without raising, when one of its side tasks fails
                    # (its heartbeat's query on a connection the database cut): a lost connection too, not
                    # the end of this host's work. Returning here left the host heartbeating to the API and
                    # taking no job, its runs queued for good.
                    raise ProcrastinateException(
                        "procrastinate's worker stopped by itself (a side task failed)"
                    )
            except (ProcrastinateException, psycopg.Error, OSError) as exc:
                if self._stop.is_set():
                    return
                if loop.time() - began >= WORKED_WELL_SECONDS:
                    delay = RETRY_FIRST_SECONDS  # a failure after a long run is a first failure again
                log.warning("job queue unreachable (%s); again in %.0fs", exc, delay)
                await self._wait_to_retry(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def _wait_to_retry(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def _drain(self) -> None:
        log.info("draining: running VMs finish, no new job is taken")
        self.draining = True
        self._stop.set()

    # --- one job -------------------------------------------------------------------------------------

    async def handle(self, run_id: int) -> None:
        if run_id in self.holding:  # a second job of a run this process is working on: the first goes on
            log.info("run %s: already being worked on here", run_id)
            return
        self.holding.add(run_id)
        try:
            await self._handle(run_id)
        finally:
            self.holding.discard(run_id)

    async def _handle(self, run_id: int) -> None:
        try:
            job = await self.api.claim(run_id)
        except HostRefused as refused:
            if refused.status in (403, 409):  # started from another job, or handed to another host since
                log.info("run %s: not ours to start (%s)", run_id, refused.refusal.detail)
                return
            if refused.status >= 500:
                text = refused.response.text[:300]
                raise ClaimFailed(f"claim of run {run_id}: {refused.status} {text}") from refused
            raise
        self.running += 1
        scratch = Path(tempfile.mkdtemp(prefix=f"cleanroom-job-{run_id}-", dir=get_settings().data_dir))
        try:
            # its log lines, and its calls to the API, carry the id of the request that proposed it
            with observe.request_id(job.request_id):
                log.info("run %s: claimed", run_id, extra={"run_id": run_id})
                await self._run(run_id, job, scratch)
        finally:
            self.running -= 1
            await asyncio.to_thread(shutil.rmtree, scratch, ignore_errors=True)

    async def _run(self, run_id: int, job: Job, scratch: Path) -> None:
        try:
            await self._attempt(run_id, job, scratch)
        except Exception as exc:  # ours, not the run's: the API requeues it if its VM never started
            log.exception("run %s failed in this host agent", run_id)
            with contextlib.suppress(Exception):
                await self.api.release(run_id, f"{type(exc).__name__}: {exc}")

    async def _fetch(self, url: str, target: Path, what: str) -> None:
        """A tar from a signed URL, unpacked into `target` within the bundle limits while it arrives."""
        async with self.api.download(url) as response:
            if response.status_code != 200:
                await response.aread()
                raise transfer.TransferError(f"{what} refused: {response.status_code} {response.text[:300]}")
            await transfer.unpack_async(
                response.aiter_bytes(),
                target,
                max_members=BUNDLE_MAX_MEMBERS,
                max_bytes=get_settings().max_staged_bytes_per_company,
            )

    async def _attempt(self, run_id: int, job: Job, scratch: Path) -> None:
        bundle = scratch / "bundle"
        carry = scratch / "carry" if job.carry_url else None
        problem = None
        try:
            await self._fetch(job.bundle_url, bundle, "bundle")
            if carry is not None:  # a flow's step: what earlier steps handed on, checked by the API
                await self._fetch(str(job.carry_url), carry, "flow hand-over")
            problem = await check(approved_job(job, bundle))
        except transfer.TransferError as exc:
            problem = f"the bundle could not be fetched: {exc}"
        if problem:
            log.warning("run %s refused: %s", run_id, problem)
            try:
                await self.api.refuse(run_id, problem)
            except HostRefused as refused:  # settled meanwhile: nothing of it is this host's any more
                log.info("run %s: refusal not taken (%s)", run_id, refused.refusal.detail)
            return
        try:
            await self.api.vm_started(run_id)
        except HostRefused as refused:
            if refused.status != 409:
                raise
            # another attempt of this host started it (a claim answered twice)
            log.info("run %s: started by another attempt (%s)", run_id, refused.refusal.detail)
            return
        out_dir = scratch / "out"
        filemodes.private_dir(out_dir)
        result = await run_approved(
            approved_job(job, bundle),
            out_dir,
            what=f"run {run_id}",
            log=log,
            carry_dir=carry,
            started_after=job.started_after,
        )
        entries = transfer.result_entries(
            result.model_dump_json().encode(), out_dir, [f.name for f in result.files]
        )
        # the tar made while it is sent, again for each attempt
        done = await self.api.send_result(
            job.result_url, lambda: transfer.async_chunks(transfer.tar_chunks(entries))
        )
        log.info("run %s: %s", run_id, done.status)


def approved_job(job: Job, bundle: Path) -> ApprovedJob:
    """What the claimed job's approval bound, over this host's copy of its bundle."""
    return ApprovedJob(bundle_dir=bundle, **job.model_dump(include=APPROVED_FIELDS))


APPROVED_FIELDS = {f.name for f in dataclasses.fields(ApprovedJob)} - {"bundle_dir"}


def run_host_agent(*, host_id: str, api_url: str, token: str, capacity: int) -> None:
    settings = get_settings()
    settings.host_id = host_id  # domain names, slots and recovery: this host's own
    agent = HostAgent(host_id=host_id, api_url=api_url, token=token, capacity=capacity)
    asyncio.run(agent.serve())
