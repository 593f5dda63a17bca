"""Gates are checked again right before a VM starts, and turning code execution off cancels what is queued.

The worker is driven directly (backend.execution.execute) with the sandbox call replaced: the stand-in
records whether a VM would have started. The real-VM path is covered by tests/runs/test_runs_vm.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from backend import execution, sandbox
from backend.audit.tables import AuditEntry
from backend.credits import service as credits
from backend.runs.tables import FINISHED, STATUSES, Run
from backend.sandbox.models import SandboxResult, Timings, VmInfo
from backend.tenancy.tables import Company
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal


@pytest.fixture
def vm_starts(monkeypatch) -> list[str]:
    """The stand-in VM: appends the code it was given, returns a clean success."""
    started: list[str] = []

    def run_code(code: str, **_: Any) -> SandboxResult:
        started.append(code)
        return SandboxResult(
            status="succeeded",
            exit_code=0,
            stdout="ok\n",
            timings_ms=Timings(total=500),
            vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"]),
        )

    monkeypatch.setattr(sandbox, "run_code", run_code)
    return started


async def _queued(client, email: str = "alice@acme.example", **body: Any) -> int:
    """A run the assistant proposed and its person approved: queued, waiting for the worker."""
    token = await token_for(client, email)
    r = await client.post("/api/runs", json=proposal(**body), headers=token)
    assert r.status_code == 201, r.text
    assert (await approve_as(client, email, r.json())).status_code == 200
    client.cookies.clear()
    row = await Run.select(Run.status).where(Run.id == r.json()["id"]).first()
    assert row["status"] == "queued"
    return r.json()["id"]


async def _set(**values: Any) -> None:
    await Company.update({getattr(Company, k): v for k, v in values.items()}).where(
        Company.name == "Acme Analytics"
    )


async def _cancellations(run_id: int) -> list[dict[str, Any]]:
    return (
        await AuditEntry.select()
        .where((AuditEntry.action == "run.cancelled") & (AuditEntry.subject_id == str(run_id)))
        .output(load_json=True)
    )


def test_cancelled_is_a_finished_status() -> None:
    assert "cancelled" in STATUSES and "cancelled" in FINISHED


# each gate is read and compared in Python before the VM (a run executed on PostgreSQL: the control below
# and the two-workers race)
@pytest.mark.sqlite
@pytest.mark.parametrize(
    "gate, off, reason",
    [
        ("code_execution_enabled", {"code_execution_enabled": False}, "code execution was turned off"),
        ("assistant_write_enabled", {"assistant_write_enabled": False}, "ability to write was turned off"),
        ("credits", {"credit_pool": 0}, "credit pool is used up"),
    ],
)
async def test_the_worker_checks_every_gate_again_before_a_vm_starts(
    client, vm_starts, gate: str, off: dict[str, Any], reason: str
) -> None:
    await enable_code()
    run_id = await _queued(client)
    await _set(**off)  # changed behind the queue's back (the settings endpoint would cancel it at once)
    assert await execution.execute(run_id) == "cancelled"
    assert vm_starts == []
    row = await Run.select().where(Run.id == run_id).first()
    assert row["status"] == "cancelled" and reason in row["error_message"], row["error_message"]
    assert row["finished_at"] is not None and row["credits_charged"] is None
    entries = await _cancellations(run_id)
    assert len(entries) == 1 and reason in entries[0]["data"]["reason"]
    assert entries[0]["actor"] == f"worker:run-{run_id}"
    assert not await AuditEntry.exists().where(
        (AuditEntry.action == "run.started") & (AuditEntry.subject_id == str(run_id))
    )
    if gate != "assistant_write_enabled":  # with the write ability off, runs are gone from the API
        await login(client, "alice@acme.example")
        detail = (await client.get(f"/api/runs/{run_id}")).json()
        assert detail["status"] == "cancelled" and reason in detail["error_message"]
        client.cookies.clear()


async def test_with_every_gate_open_the_vm_starts(client, vm_starts) -> None:
    """Positive control for the test above: the same run, nothing turned off, runs."""
    await enable_code()
    run_id = await _queued(client)
    assert await execution.execute(run_id) == "succeeded"
    assert len(vm_starts) == 1
    assert await _cancellations(run_id) == []


# the credit gate's arithmetic, the app's (a run executed on PostgreSQL: the positive control above)
@pytest.mark.sqlite
async def test_credits_left_for_one_more_run_let_it_start(client, vm_starts) -> None:
    """The credit gate is the same minimum that approval checks: a pool with exactly one base charge left
    still starts the run; one with less does not."""
    await enable_code()
    first, second = await _queued(client), await _queued(client)
    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    used = await credits.used(acme)
    await _set(credit_pool=int(used + credits.BASE_CHARGE) + 1)
    assert await execution.execute(first) == "succeeded"
    await _set(credit_pool=int(await credits.used(acme)))  # less than one base charge left
    assert await execution.execute(second) == "cancelled"
    assert len(vm_starts) == 1


# which runs a settings change cancels is the app's (a run executed on PostgreSQL: the positive control
# above)
@pytest.mark.sqlite
async def test_turning_code_execution_off_cancels_the_companys_queued_runs(client, vm_starts) -> None:
    await enable_code()
    await enable_code("Globex")
    queued = [await _queued(client), await _queued(client, "maria@acme.example")]
    waiting = (
        await client.post("/api/runs", json=proposal(), headers=await token_for(client, "bob@acme.example"))
    ).json()["id"]  # not approved yet: it stays awaiting approval, and approval is then refused
    other_company = await _queued(client, "gina@globex.example")

    await login(client, "admin@acme.example")
    r = await client.patch("/api/company/settings", json={"code_execution_enabled": False})
    assert r.status_code == 200, r.text
    client.cookies.clear()

    for run_id in queued:
        row = await Run.select().where(Run.id == run_id).first()
        assert row["status"] == "cancelled"
        assert "code execution was turned off" in row["error_message"]
        entries = await _cancellations(run_id)
        assert len(entries) == 1 and entries[0]["actor"] == "admin@acme.example"
    assert (await Run.select(Run.status).where(Run.id == waiting).first())["status"] == "awaiting_approval"
    # the worker finds nothing of Acme's to start; Globex's run is untouched and runs
    assert await execution.queued_ids() == [other_company]
    assert await execution.execute(queued[0]) == "cancelled"  # a late pick-up does not revive it
    assert await execution.execute(other_company) == "succeeded"
    assert len(vm_starts) == 1


@pytest.mark.sqlite  # the control of the test above, on the same engine
async def test_other_settings_changes_leave_queued_runs_alone(client, vm_starts) -> None:
    """Positive control: a settings change that turns no gate off cancels nothing."""
    await enable_code()
    run_id = await _queued(client)
    await login(client, "admin@acme.example")
    for change in ({"followup_without_reapproval": True}, {"code_execution_enabled": True}):
        r = await client.patch("/api/company/settings", json=change)
        assert r.status_code == 200, r.text
    client.cookies.clear()
    assert (await Run.select(Run.status).where(Run.id == run_id).first())["status"] == "queued"
    assert await execution.execute(run_id) == "succeeded"


@pytest.mark.sqlite  # which runs a settings change cancels is the app's, not an engine's
async def test_turning_the_assistants_write_ability_off_cancels_queued_runs(client, vm_starts) -> None:
    await enable_code()
    run_id = await _queued(client)
    await login(client, "admin@acme.example")
    r = await client.patch("/api/company/settings", json={"assistant_write_enabled": False})
    assert r.status_code == 200, r.text
    client.cookies.clear()
    row = await Run.select().where(Run.id == run_id).first()
    assert row["status"] == "cancelled" and "ability to write" in row["error_message"]
    assert len(await _cancellations(run_id)) == 1
    assert vm_starts == []


@pytest.mark.sqlite  # the sandbox's cap and its marker, not an engine's (results stored on PostgreSQL: the tests around)
async def test_printed_output_is_kept_as_the_sandbox_capped_it(client, monkeypatch) -> None:
    """One stdout cap, the sandbox's: the worker stores its text and single marker, and cuts nothing more."""
    from backend.sandbox.output import STDOUT_MARKER, cap_stream
    from backend.settings import get_settings

    cap = 64
    monkeypatch.setattr(get_settings(), "stdout_cap_bytes", cap)
    stdout, truncated = cap_stream(b"x" * 1000, cap)

    def run_code(code: str, **_: Any) -> SandboxResult:
        return SandboxResult(status="succeeded", exit_code=0, stdout=stdout, stdout_truncated=truncated)

    monkeypatch.setattr(sandbox, "run_code", run_code)
    await enable_code()
    run_id = await _queued(client)
    assert await execution.execute(run_id) == "succeeded"
    await login(client, "alice@acme.example")
    result = (await client.get(f"/api/runs/{run_id}")).json()["result"]
    assert result["stdout"] == "x" * cap + STDOUT_MARKER.format(cap=cap)
    assert result["stdout_truncated"] is True


def test_the_gates_hook_is_wired_at_start_up_not_by_importing_it() -> None:
    """`gates.wire()` (called by `create_app`) hooks the cancellation into tenancy; importing the module does
    nothing by itself, and wiring twice hooks once. In a fresh interpreter: this one's app already wired."""
    import subprocess
    import sys

    script = (
        "from backend.runs import gates\n"
        "from backend.tenancy import service\n"
        "print(len(service._GATE_CLOSED))\n"
        "gates.wire(); gates.wire()\n"
        "print(service._GATE_CLOSED == [gates._cancel_when_closed])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "True"]


async def test_two_workers_that_find_a_run_queued_at_once_run_it_once(client, acme_on, monkeypatch) -> None:
    """The embedded soak found runs started and charged twice: a worker started while the previous one (its
    API killed before that worker wrote its pid file) still took runs. Both found the run queued; the second's
    update changed nothing, its re-read saw `running` and it ran the run too. Now only the caller whose update
    moved the run from `queued` runs it."""
    import asyncio
    import threading

    from backend.execution.execute import execute

    inside, release, started = threading.Event(), threading.Event(), []

    def run_code(code: str, **_: Any) -> SandboxResult:
        started.append(code)
        inside.set()
        release.wait(10)  # the first VM runs while the second worker looks at the same run
        return SandboxResult(status="succeeded", exit_code=0, stdout="ok\n", timings_ms=Timings(total=500))

    monkeypatch.setattr(sandbox, "run_code", run_code)
    run_id = await _queued(client)
    first = asyncio.create_task(execute(run_id))
    await asyncio.to_thread(inside.wait, 10)
    assert await execute(run_id) == "running"  # the second finds it taken and leaves it alone
    release.set()
    assert await first == "succeeded"
    assert len(started) == 1
    starts = await AuditEntry.count().where(
        (AuditEntry.action == "run.started") & (AuditEntry.subject_id == str(run_id))
    )
    charged = await AuditEntry.count().where(
        (AuditEntry.action == "credits.charged") & (AuditEntry.subject_id == str(run_id))
    )
    assert (starts, charged) == (1, 1)
    # control: a queued run is run by the one worker that takes it
    other = await _queued(client)
    release.set()
    assert await execute(other) == "succeeded" and len(started) == 2


def test_a_second_local_worker_waits_for_the_first_to_end_before_anything(tmp_path, monkeypatch) -> None:
    """`process._hold_the_data_dir`: the lock is the data directory's, held for the worker's life and let go
    when it dies (SIGKILL too). A second holder waits; once the first is gone it goes on."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys
    import time

    from backend.execution import process
    from backend.settings import get_settings

    monkeypatch.setattr(get_settings(), "data_dir", tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(tmp_path / process.LOCKFILE)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"

        async def second() -> float:
            began = time.monotonic()
            fd = await process._hold_the_data_dir()
            os.close(fd)
            return time.monotonic() - began

        async def both() -> float:
            waiting = asyncio.create_task(second())
            await asyncio.sleep(1.0)
            assert not waiting.done()  # the first worker lives: the second waits
            holder.send_signal(signal.SIGKILL)  # killed outright: the kernel lets go of its lock
            return await asyncio.wait_for(waiting, 10)

        assert asyncio.run(both()) >= 1.0
    finally:
        holder.kill()
        holder.wait()
    # control: with nobody holding it, the lock is taken at once
    os.close(asyncio.run(process._hold_the_data_dir()))


def test_a_worker_waiting_for_the_lock_gives_up_when_told_to(tmp_path, monkeypatch) -> None:
    """A worker waiting for the previous one must still hear SIGTERM and notice its API gone: blocked in
    flock() it heard neither, and a `serve` stopped while its worker waited left that worker behind for as
    long as the other one lived. Told to give up, it returns None without the lock and without waiting on."""
    import asyncio
    import fcntl
    import os
    import time

    from backend.execution import process
    from backend.settings import get_settings

    monkeypatch.setattr(get_settings(), "data_dir", tmp_path)
    held = os.open(tmp_path / process.LOCKFILE, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # another open file description: flock() refuses the second one
    try:

        async def told_after(seconds: float) -> tuple[int | None, float]:
            began = time.monotonic()
            result = await process._hold_the_data_dir(lambda: time.monotonic() - began > seconds)
            return result, time.monotonic() - began

        lock, waited = asyncio.run(told_after(0.6))
        assert lock is None and 0.6 <= waited < 5
    finally:
        os.close(held)
    # control: the lock free, the same call takes it even though it would give up at once
    lock, _ = asyncio.run(told_after(0.0))
    assert lock is not None
    os.close(lock)
