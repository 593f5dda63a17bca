"""The queue and worker: approved runs go through the sandbox, at most N VMs at once.

Right before a VM starts, the code and the staged bundle are hashed again and compared with what was
approved; any difference refuses the run. Then the gates are checked again (the company switch, the
assistant's write ability, credits): a run queued before an admin turned something off never starts.
The queue serves companies in turn, so one company's burst cannot starve another's approved run.
The embedded default runs this loop inside the API process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.audit import service as audit
from backend.credits import service as credits
from backend.hashing import sha256_json, sha256_text
from backend.runs import gates
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.staging.service import MANIFEST, verify_bundle
from backend.tenancy.context import load_user_context

log = logging.getLogger("cleanroom.worker")


def _now() -> datetime:
    return datetime.now(UTC)


async def _finish(run_id: int, status: str, **values: Any) -> None:
    update = {Run.status: status, Run.finished_at: _now(), Run.updated_at: _now()}
    for key, value in values.items():
        update[getattr(Run, key)] = value
    await Run.update(update).where(Run.id == run_id)


def hash_problem(run: dict[str, Any]) -> str | None:
    """Why this run must not start, or None. Compares what is stored now with what was approved."""
    if not run["approved_at"] or not run["approved_code_sha256"] or not run["approved_bundle_sha256"]:
        return "the run has no approval"
    current_code = sha256_text(run["code"])
    if current_code != run["approved_code_sha256"]:
        return f"the code changed after approval (approved {run['approved_code_sha256'][:12]}…, now {current_code[:12]}…)"
    if run["code_sha256"] != run["approved_code_sha256"]:
        return "the stored code hash does not match the approval"
    problem = verify_bundle(Path(run["bundle_dir"]), run["approved_bundle_sha256"])
    if problem:
        return f"the staged data changed after approval: {problem}"
    try:
        on_disk = json.loads((Path(run["bundle_dir"]) / MANIFEST).read_text())
    except (OSError, ValueError):
        return "the staged manifest is unreadable"
    if sha256_json(on_disk) != sha256_json(run["manifest"]):
        return "the staged manifest differs from the one shown for approval"
    return None


CODE_EXECUTION_OFF = "code execution was turned off for this company"
ASSISTANT_WRITE_OFF = "the assistant's ability to write was turned off for this company"


async def gate_problem(company_id: int) -> str | None:
    """Why no VM may start for this company now, or None: the gates a run passed at approval, again."""
    company = await gates.company(company_id)
    if not company["assistant_write_enabled"]:
        return ASSISTANT_WRITE_OFF
    if not company["code_execution_enabled"]:
        return CODE_EXECUTION_OFF
    return await credits.blocked_reason(company_id)


async def cancel_queued(company_id: int, reason: str, *, actor: str) -> list[int]:
    """End every queued run of the company without starting a VM (a gate was turned off). Audited per run."""
    rows = await Run.select(Run.id).where((Run.company == company_id) & (Run.status == "queued"))
    cancelled = []
    for row in rows:
        # the status condition makes this safe against the worker picking the run up at the same moment
        done = (
            await Run.update(
                {
                    Run.status: "cancelled",
                    Run.finished_at: _now(),
                    Run.updated_at: _now(),
                    Run.error_message: f"cancelled before it started: {reason}",
                }
            )
            .where((Run.id == row["id"]) & (Run.status == "queued"))
            .returning(Run.id)
        )
        if not done:
            continue
        cancelled.append(row["id"])
        await audit.record(
            "run.cancelled",
            actor=actor,
            company_id=company_id,
            subject_type="run",
            subject_id=row["id"],
            data={"reason": reason},
        )
    return cancelled


async def execute(run_id: int) -> str:
    """Run one queued run to its end. Returns the final status."""
    from backend import sandbox

    await Run.update({Run.status: "running", Run.started_at: _now(), Run.updated_at: _now()}).where(
        (Run.id == run_id) & (Run.status == "queued")
    )
    run = await Run.select().where(Run.id == run_id).output(load_json=True).first()
    if run is None or run["status"] != "running":
        return run["status"] if run else "missing"
    company_id = run["company"]
    actor = f"worker:run-{run_id}"
    problem = hash_problem(run)
    if problem:
        await _finish(run_id, "error", error_message=f"refused to start: {problem}")
        await audit.record(
            "run.refused",
            actor=actor,
            company_id=company_id,
            subject_type="run",
            subject_id=run_id,
            data={"problem": problem},
        )
        return "error"
    reason = await gate_problem(company_id)
    if reason:
        await _finish(run_id, "cancelled", error_message=f"cancelled before it started: {reason}")
        await audit.record(
            "run.cancelled",
            actor=actor,
            company_id=company_id,
            subject_type="run",
            subject_id=run_id,
            data={"reason": reason},
        )
        return "cancelled"
    await audit.record(
        "run.started",
        actor=actor,
        company_id=company_id,
        subject_type="run",
        subject_id=run_id,
        data={"code_sha256": run["approved_code_sha256"], "bundle_sha256": run["approved_bundle_sha256"]},
    )
    limits = sandbox.RunLimits(**run["limits"])
    out_dir = Path(tempfile.mkdtemp(prefix=f"cleanroom-out-{run_id}-", dir=get_settings().data_dir))
    try:
        try:
            result = await asyncio.to_thread(
                sandbox.run_code,
                run["code"],
                input_dir=Path(run["bundle_dir"]),
                out_dir=out_dir,
                limits=limits,
                read_actions=run["read_actions"],
            )
        except Exception as exc:  # the sandbox promises a result; anything else is our fault
            log.exception("sandbox failed for run %s", run_id)
            result = sandbox.SandboxResult(status="error", error=f"{type(exc).__name__}: {exc}")
        return await _record_result(run, result, out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


async def source_datasets(run: dict[str, Any]) -> list[str]:
    """The datasets a run's outputs are computed from: those it staged, and those its staged Drive files
    were computed from (an output staged into another run keeps its tags). Drive shows the outputs only
    to people who may read every one of them (records/visibility.py)."""
    from backend.drive import service as drive
    from backend.drive.tables import DriveFile

    names = set(run["datasets"] or [])
    if run["file_ids"]:
        for row in await DriveFile.select(DriveFile.source_datasets).where(
            (DriveFile.id.is_in(list(run["file_ids"]))) & (DriveFile.company == run["company"])
        ):
            names.update(drive.source_tags(row["source_datasets"]))
    return sorted(names)


async def _record_result(run: dict[str, Any], result: Any, out_dir: Path) -> str:
    from backend.actions import service as actions
    from backend.drive import service as drive

    run_id, company_id = run["id"], run["company"]
    actor = f"worker:run-{run_id}"
    requester = await load_user_context(run["requested_by"])
    cap = get_settings().stdout_cap_bytes
    stored = result.model_dump(mode="json", exclude={"actions"})
    for stream in ("stdout", "stderr"):
        if len(stored[stream].encode()) > cap:
            stored[stream] = (
                stored[stream].encode()[:cap].decode(errors="ignore") + "\n[… output cut at the cap]"
            )
            if stream == "stdout":
                stored["stdout_truncated"] = True
    folder_id = None
    outputs = []
    if result.files:
        sources = await source_datasets(run)
        folder = await drive.create_folder(
            requester,
            f"Run {run_id} — {run['title']}"[:200],
            visibility="private",
            run_id=run_id,
            source_datasets=sources,
        )
        folder_id = folder["id"]
        for f in result.files:
            path = out_dir / f.name
            if not path.is_file():
                continue
            row = await drive.upload(
                requester,
                f.name,
                path.read_bytes(),
                folder_id=folder_id,
                visibility="private",
                run_id=run_id,
                audit_actor=actor,
                source_datasets=sources,
            )
            outputs.append({"name": f.name, "sha256": row["sha256"], "drive_file_id": row["id"]})
    note = None
    if run["read_actions"] and result.status == "succeeded" and result.actions is not None:
        note = await actions.ingest(run, result.actions, requester)
    seconds = max(0.0, (result.timings_ms.total or 0) / 1000)
    charged = await credits.charge(
        company_id=company_id,
        user_id=run["requested_by"],
        run_id=run_id,
        vcpus=run["limits"]["vcpus"],
        memory_mib=run["limits"]["memory_mib"],
        seconds=seconds,
        actor=actor,
    )
    await _finish(
        run_id,
        result.status,
        result=stored,
        error_message=result.error,
        output_folder_id=folder_id,
        credits_charged=charged,
        actions_discarded=bool(result.actions_discarded),
        actions_note=note,
    )
    await audit.record(
        "run.finished",
        actor=actor,
        company_id=company_id,
        subject_type="run",
        subject_id=run_id,
        data={
            "status": result.status,
            "exit_code": result.exit_code,
            "outputs": outputs,
            "rejected_files": [r.model_dump() for r in result.rejected_files],
            "actions": None if result.actions is None else len(result.actions),
            "actions_discarded": bool(result.actions_discarded),
            "vm": result.vm.model_dump(mode="json"),
            "credits": charged,
        },
    )
    return result.status


async def recover() -> int:
    """At start: a run left `running` by a dead service becomes `error`, and no VM of ours survives."""
    from backend import sandbox

    stuck = await Run.select(Run.id, Run.company).where(Run.status == "running")
    for row in stuck:
        await _finish(
            row["id"],
            "error",
            error_message="the service stopped while this run was running; no output was kept",
        )
        await audit.record(
            "run.recovered",
            actor="system",
            company_id=row["company"],
            subject_type="run",
            subject_id=row["id"],
            data={"status": "error"},
        )
    try:
        removed = await asyncio.to_thread(sandbox.recover_leftovers)
        if removed:
            log.warning("removed leftover sandbox resources: %s", removed)
    except Exception:  # libvirt down: runs will fail with a clear error, the API still serves
        log.exception("sandbox crash recovery failed")
    return len(stuck)


async def queued_ids() -> list[int]:
    """Queued runs in the order to start them: round-robin across companies, each company's oldest first.

    Round one holds the oldest queued run of every company, round two the second oldest, and so on;
    within a round, companies with fewer runs already running go first, then the longest-waiting.
    """
    queued = await Run.select(Run.id, Run.company).where(Run.status == "queued").order_by(Run.id)
    running: dict[int, int] = {}
    for row in await Run.select(Run.company).where(Run.status == "running"):
        running[row["company"]] = running.get(row["company"], 0) + 1
    per_company: dict[int, list[int]] = {}
    for row in queued:
        per_company.setdefault(row["company"], []).append(row["id"])
    turn = sorted(per_company, key=lambda c: (running.get(c, 0), per_company[c][0]))
    ordered: list[int] = []
    for position in range(max((len(ids) for ids in per_company.values()), default=0)):
        ordered.extend(per_company[c][position] for c in turn if position < len(per_company[c]))
    return ordered


async def drain() -> None:
    """Run everything queued now, up to the VM cap at once (tests and the CLI use this)."""
    limit = asyncio.Semaphore(max(1, get_settings().max_concurrent_vms))

    async def one(run_id: int) -> None:
        async with limit:
            await execute(run_id)

    while ids := await queued_ids():
        await asyncio.gather(*(one(i) for i in ids))


class Worker:
    """The in-process worker: polls the queue, and fires due schedules."""

    def __init__(self, poll_seconds: float = 0.5) -> None:
        self.poll_seconds = poll_seconds
        self.active: set[int] = set()
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._last_schedule_check = 0.0

    @property
    def running(self) -> int:
        return len(self.active)

    async def start(self) -> None:
        await recover()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
        for task in list(self._tasks):
            task.cancel()

    async def _loop(self) -> None:
        from backend.schedules import service as schedules

        loop = asyncio.get_running_loop()
        while True:
            try:
                if loop.time() - self._last_schedule_check > 15:
                    self._last_schedule_check = loop.time()
                    await schedules.fire_due()
                capacity = max(1, get_settings().max_concurrent_vms) - len(self.active)
                for run_id in (await queued_ids())[: max(0, capacity)]:
                    if run_id in self.active:
                        continue
                    self.active.add(run_id)
                    task = asyncio.create_task(self._run(run_id))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker loop error")
            await asyncio.sleep(self.poll_seconds)

    async def _run(self, run_id: int) -> None:
        try:
            await execute(run_id)
        except Exception:
            log.exception("run %s failed in the worker", run_id)
            await _finish(run_id, "error", error_message="internal error in the worker; see the server log")
        finally:
            self.active.discard(run_id)


WORKER = Worker()


async def start_worker() -> None:
    await WORKER.start()


async def stop_worker() -> None:
    await WORKER.stop()
