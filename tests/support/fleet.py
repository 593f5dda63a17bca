"""A fleet host as the tests drive it: a registered host's token, a queued run handed to it, a result tarball, the
dispatcher, and unpacking in the shared executor."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from backend.fleet import queue as fleet_queue
from backend.fleet import service, transfer
from backend.sandbox.models import OutputFile, SandboxResult, Timings
from tests.support.http import approve_as
from tests.support.runs import proposal


async def _queued_run(client, alice, **extra) -> dict:
    response = await client.post("/api/runs", json=proposal(**extra), headers=alice)
    assert response.status_code == 201, response.text
    run = response.json()
    assert (await approve_as(client, "alice@acme.example", run)).status_code == 200
    client.cookies.clear()
    return run


async def _dispatch() -> list[int]:
    """What the fleet's dispatcher does on its next pass: queued runs handed to hosts with free slots."""
    app = fleet_queue.make_app()
    await fleet_queue.ensure_schema(app)
    async with app.open_async():
        return await fleet_queue.dispatch(app)


async def _worker(client, host_id: str, capacity: int = 2) -> dict[str, str]:
    """`host_id` enrolled by the operator for `capacity` VMs, registered saying it runs that many."""
    token = await service.enroll(host_id, created_by="test", capacity=capacity)
    headers = {"Authorization": f"Bearer {token}"}
    response = await client.post("/api/worker/hosts", json={"capacity": capacity}, headers=headers)
    assert response.status_code == 200, response.text
    return headers


def _result_tar(tmp_path: Path) -> bytes:
    """A run's result as a worker packs it: printed output and one output file."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "total.csv").write_text("region,amount\nnorth,5\n")
    result = SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout="5\n",
        files=[OutputFile(name="total.csv", size=22, sha256="0" * 64)],
        timings_ms=Timings(total=1500.0),
    )
    packed = tmp_path / "result.tar"
    transfer.pack_result(result.model_dump_json().encode(), out, ["total.csv"], packed)
    return packed.read_bytes()


async def unpack_in_shared_executor(
    chunks: AsyncIterator[bytes], target: Path, *, max_members: int, max_bytes: int
) -> list[str]:
    """`transfer.unpack_async` as it was: the unpack in the loop's shared executor, a thread of it held while
    the sender takes its time (the controls here and in tests/fleet/test_worker_api.py)."""
    loop = asyncio.get_running_loop()
    iterator = aiter(chunks)

    def next_chunk() -> bytes | None:
        return asyncio.run_coroutine_threadsafe(anext(iterator, None), loop).result()

    reader = transfer._ChunkReader(next_chunk, transfer._stream_limit(max_members, max_bytes))
    return await asyncio.to_thread(
        transfer.unpack_stream, reader, target, max_members=max_members, max_bytes=max_bytes
    )


SNEAKY = 'access = "user"  # \u202e } \u2066if admin:\u2069 \u2066 begin admins only\nprint(access)\n'
