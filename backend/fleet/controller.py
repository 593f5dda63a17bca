"""The worker API under /api/worker: only an enrollment token (`Bearer cwt_…`) reaches it, and a worker
acts only on runs it holds. A bundle or a result moves only with a signed URL for that run, host and
purpose as well. People and the assistant get 401 here; a worker token gets 401 everywhere else."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from litestar import Controller, Request, get, post
from litestar.response import Stream

from backend import clock
from backend.errors import AppError
from backend.fleet import service, transfer
from backend.fleet.schemas import Done, HeartbeatBody, HostBody, Job, RefuseBody, Registered
from backend.flows import progress as flows
from backend.runs.tables import Run
from backend.sandbox.models import MAX_ACTIONS_BYTES, MAX_OUTPUT_BYTES, MAX_OUTPUT_FILES, SandboxResult
from backend.settings import get_settings
from backend.tenancy.auth import SELF_AUTHENTICATED

RESULT_MAX_BYTES = MAX_OUTPUT_BYTES + MAX_ACTIONS_BYTES + 8 * 1024 * 1024  # files, actions, printed output


def _tar_of(directory: Path, name: str, what: str) -> Stream:
    """`directory` as a tar, made while it is sent (no archive on disk or in memory)."""
    if not directory.is_dir():
        raise AppError(f"{what} is gone", code="gone", status_code=410)
    return Stream(
        transfer.tar_chunks(transfer.directory_entries(directory)),
        media_type="application/x-tar",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def _host(request: Request) -> str:
    return await service.host_for_token(request.headers.get("authorization", ""))


class WorkerController(Controller):
    path = "/api/worker"
    tags = ["workers"]
    opt = SELF_AUTHENTICATED
    include_in_schema = True

    @post("/hosts", status_code=200)
    async def register(self, request: Request, data: HostBody) -> Registered:
        """A worker starts: its host id and the most VMs it is offered come from its token (the operator's
        enrollment); runs it held before are settled."""
        host_id, enrolled_capacity = await service.enrolled(request.headers.get("authorization", ""))
        settled = await service.register(
            host_id,
            libvirt_uri=data.libvirt_uri,
            virt_type=data.virt_type,
            image_hash=data.image_hash,
            capacity=data.capacity,
            enrolled_capacity=enrolled_capacity,
        )
        return Registered(host_id=host_id, settled_runs=settled)

    @post("/heartbeat", status_code=200)
    async def heartbeat(self, request: Request, data: HeartbeatBody) -> Done:
        """Alive, with the runs it is working on and whether it is draining."""
        await service.heartbeat(
            request.headers.get("authorization", ""),
            running=data.running,
            draining=data.draining,
            holding=data.holding,
        )
        return Done()

    @post("/leave", status_code=200)
    async def leave(self, request: Request) -> Done:
        """A drained worker stops: it is no longer offered runs (its held runs, if any, are settled)."""
        await service.leave(await _host(request))
        return Done()

    @post("/runs/{run_id:int}/claim", status_code=200)
    async def claim(self, request: Request, run_id: int) -> Job:
        """queued → running for this host, once; the run's code, limits, approval and signed URLs."""
        return Job(**await service.claim(await _host(request), run_id))

    @get("/runs/{run_id:int}/bundle", media_type="application/x-tar")
    async def bundle(self, request: Request, run_id: int, expires: int, sig: str) -> Stream:
        """The staged bundle as a tar stream, to the host holding the run, with its signed URL."""
        host_id = await _host(request)
        service.check_signature(run_id, host_id, "bundle", expires, sig)
        run = await service.held_run(host_id, run_id, Run.bundle_dir)  # not the code, manifest or result
        if not run["bundle_dir"]:
            raise AppError("this run's staged bundle is gone", code="gone", status_code=410)
        return _tar_of(Path(run["bundle_dir"]), f"run-{run_id}.tar", "this run's staged bundle")

    @get("/runs/{run_id:int}/carry", media_type="application/x-tar")
    async def carry(self, request: Request, run_id: int, expires: int, sig: str) -> Stream:
        """A flow step's /work/flow (earlier steps' conclusions and the outputs it receives) as a tar."""
        host_id = await _host(request)
        service.check_signature(run_id, host_id, "carry", expires, sig)
        run = await service.held_run(host_id, run_id)
        if run["flow_id"] is None:
            raise AppError("this run is not a flow's step", code="gone", status_code=410)
        return _tar_of(flows.carry_dir(run), f"run-{run_id}-flow.tar", "what earlier steps handed on")

    @post("/runs/{run_id:int}/vm-started", status_code=200)
    async def vm_started(self, request: Request, run_id: int) -> Done:
        """The bundle matched the approval and the VM starts now: from here on the run is never retried."""
        await service.vm_started(await _host(request), run_id)
        return Done()

    @post("/runs/{run_id:int}/refuse", status_code=200)
    async def refuse(self, request: Request, run_id: int, data: RefuseBody) -> Done:
        """The bundle or the code differ from what was approved: the run ends without starting."""
        await service.refuse(await _host(request), run_id, data.problem)
        return Done(status="error")

    @post("/runs/{run_id:int}/release", status_code=200)
    async def release(self, request: Request, run_id: int, data: RefuseBody) -> Done:
        """The worker failed with a run (not the run itself): back to the queue if its VM never started,
        else it ends `error`."""
        status = await service.release(await _host(request), run_id, data.problem)
        return Done(status=status)

    @post("/runs/{run_id:int}/result", status_code=200)
    async def result(self, request: Request, run_id: int, expires: int, sig: str) -> Done:
        """The run's result and output files (a tar stream) from the host holding it, with its signed URL."""
        arrived_at = clock.now()  # the end of its run time, on the API's clock (`service.api_seconds`)
        host_id = await _host(request)
        service.check_signature(run_id, host_id, "result", expires, sig)
        # refused before a byte is read; `record` reads the whole run again once the upload is in (the run
        # may have been settled while it came)
        await service.held_run(host_id, run_id, Run.id)
        scratch = Path(tempfile.mkdtemp(prefix="cleanroom-recv-", dir=get_settings().data_dir))
        try:
            out = scratch / "out"
            try:
                await transfer.unpack_async(
                    request.stream(), out, max_members=MAX_OUTPUT_FILES + 8, max_bytes=RESULT_MAX_BYTES
                )
                raw = json.loads((out / transfer.RESULT_JSON).read_text())
                result = SandboxResult.model_validate(raw)
            except transfer.TooLarge as exc:
                raise AppError(
                    f"the result is larger than a run may produce: {exc}", code="too_large", status_code=413
                ) from exc
            except (transfer.TransferError, OSError, ValueError, RecursionError) as exc:
                raise AppError(
                    f"the result could not be read: {exc}", code="invalid", status_code=422
                ) from exc
            status = await service.record(
                host_id, run_id, result, out / transfer.FILES, arrived_at=arrived_at
            )
            return Done(status=status)
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, ignore_errors=True)
