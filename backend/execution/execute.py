"""One run from queued to finished.

Right before a VM starts, the code and the staged bundle are hashed again and compared with what was
approved; any difference refuses the run. Then the gates are checked again (the company switch, the
assistant's write ability, credits): a run queued before an admin turned something off never starts.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from backend import clock, observe, sandbox
from backend.actions import service as actions
from backend.actions.tables import ActionItem
from backend.audit import service as audit
from backend.credits import service as credits
from backend.drive import service as drive
from backend.errors import AppError
from backend.evidence import rerun as rerun_policy
from backend.execution import rerun
from backend.flows import progress as flows
from backend.notify import service as notify
from backend.runs import approved, ended, gates
from backend.runs.rows import whole_run
from backend.runs.sources import staged_sources
from backend.runs.tables import RETRYABLE, Run, RunStatus
from backend.sandbox.models import RejectedFile
from backend.settings import get_settings
from backend.staging.bundle import remove_bundle
from backend.tenancy.context import load_user_context

log = logging.getLogger("cleanroom.loop")


async def finish(
    run_id: int,
    status: str,
    *,
    entry: dict[str, Any] | None = None,
    only_if: Any = None,
    known: tuple[dict[str, Any], dict[str, Any] | None] | None = None,
    **values: Any,
) -> bool:
    """Every end of a run after its approval goes through here, and with it `entry` (the arguments of
    `audit.record`) in the same transaction: nobody reads a run ended without the entry that says so, and a
    crash between the two cannot leave one without the other. Then a flow's step moves its flow on.

    `only_if` (a condition on the run's row) makes the end conditional: when the row no longer matches (a
    result that landed first), nothing is written, neither the end nor its entry, and it returns False."""
    update = {Run.status: status, Run.finished_at: clock.now(), Run.updated_at: clock.now()}
    for key, value in values.items():
        update[getattr(Run, key)] = value
    where = Run.id == run_id if only_if is None else (Run.id == run_id) & only_if
    if entry is None and only_if is None:
        await Run.update(update).where(where)
    else:
        async with audit.atomic():
            if only_if is None:
                await Run.update(update).where(where)
            elif not await Run.update(update).where(where).returning(Run.id):
                return False
            if entry is not None:
                await audit.record(**entry)
    await ended.announce(
        run_id, status, known
    )  # `known`: the run's and its company's rows, when read already
    return True


def hash_problem(run: dict[str, Any]) -> str | None:
    """Why this run must not start, or None: `approved.approval_problem` over the run's row."""
    return approved.approval_problem(approved.ApprovedJob.of(run))


async def execute(run_id: int) -> str:
    """Run one queued run to its end. Returns the final status. Only the caller whose update took the run
    from `queued` runs it: two workers that found it queued at once (one starting while another had not yet
    noticed its API was gone) never both do."""
    claimed = (
        await Run.update(
            {Run.status: RunStatus.running, Run.started_at: clock.now(), Run.updated_at: clock.now()}
        )
        .where((Run.id == run_id) & (Run.status == RunStatus.queued))
        .returning(Run.id)
    )
    run = await whole_run(run_id)
    if not claimed or run is None or run["status"] != RunStatus.running:
        return run["status"] if run else "missing"
    status: str | None = None
    # its log lines carry the id of the request that proposed it (backend/observe.py)
    with observe.request_id(run.get("request_id")):
        log.info("run %s: started", run_id, extra={"run_id": run_id})
        try:
            status = await _execute(run)
            return status
        finally:  # the staged copy of company data goes when the run ends; the manifest stays in the row
            if not await keeps_bundle_after(run, status):
                await asyncio.to_thread(remove_bundle, run["bundle_dir"])
            log.info("run %s: %s", run_id, status or "failed in the worker", extra={"run_id": run_id})


async def keeps_bundle_after(run: dict[str, Any], status: str | None) -> bool:
    """Whether a run that ended with `status` keeps its bundle: for a revision (`keeps_bundle`; a flow's step
    is never revised), or for a re-run as evidence while its company keeps approved bundles
    (`evidence_retention_days`, backend/evidence/rerun.py)."""
    if run["flow_id"] is not None:
        return False
    if keeps_bundle(status):
        return True
    if status not in rerun_policy.KEPT_STATUSES:
        return False
    try:
        days = await rerun_policy.evidence_days(run["company"])
    except Exception:  # the run has ended as it ended: unable to read the setting, keep nothing
        log.exception("run %s: could not read the company's evidence retention; its bundle goes", run["id"])
        return False
    return rerun_policy.kept_for_evidence(status, None, days)


def keeps_bundle(status: str | None) -> bool:
    """Whether a run that ended with `status` after its VM started keeps its bundle for a while: one that
    failed (it may be revised) while `failed_bundle_retention_days` is above zero. Everything else - a
    success, a run refused or cancelled before its VM started, an internal error - loses it at once; the
    retained ones go in `retention.sweep_bundles`."""
    return status in RETRYABLE and get_settings().failed_bundle_retention_days > 0


async def end_unstarted(run: dict[str, Any], status: RunStatus, action: str, why: str, **data: str) -> str:
    """End a run whose VM never started (hashes changed, or a gate closed), audited with what stopped it.
    Its bundle is deleted now: nothing ran on it, and whatever refused it (a changed bundle) is not kept."""
    (detail,) = data.values()
    await asyncio.to_thread(remove_bundle, run["bundle_dir"])
    entry = end_entry(action, audit.run_actor(run["id"]), run, data)
    await finish(run["id"], status, entry=entry, error_message=f"{why}: {detail}")
    return status


def end_entry(action: str, actor: str, run: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The audit entry of a run's end, for `finish`."""
    return {
        "action": action,
        "actor": actor,
        "company_id": run["company"],
        "subject_type": "run",
        "subject_id": run["id"],
        "data": data,
    }


async def _execute(run: dict[str, Any]) -> str:
    run_id, company_id = run["id"], run["company"]
    actor = audit.run_actor(run_id)
    problem = await asyncio.to_thread(hash_problem, run)  # re-hashes the whole bundle: off the event loop
    if problem:
        return await end_unstarted(run, RunStatus.error, "run.refused", "refused to start", problem=problem)
    reason = await gates.gate_problem(company_id)
    if reason:
        return await end_unstarted(
            run, RunStatus.cancelled, "run.cancelled", "cancelled before it started", reason=reason
        )
    await audit.record(
        "run.started",
        actor=actor,
        company_id=company_id,
        subject_type="run",
        subject_id=run_id,
        data={"code_sha256": run["approved_code_sha256"], "bundle_sha256": run["approved_bundle_sha256"]},
    )
    out_dir = Path(tempfile.mkdtemp(prefix=f"cleanroom-out-{run_id}-", dir=get_settings().data_dir))
    carry_dir, started_after = None, None
    try:
        if run["flow_id"] is not None:  # what earlier steps handed on: /work/flow in the guest
            carry_dir, started_after = await flows.carry_in(run)
        job = approved.ApprovedJob.of(run)
        result = await approved.run_approved(
            job, out_dir, what=f"run {run_id}", log=log, carry_dir=carry_dir, started_after=started_after
        )
        return await record_result(run, result, out_dir)
    finally:
        await asyncio.to_thread(shutil.rmtree, out_dir, ignore_errors=True)
        if carry_dir is not None:
            await asyncio.to_thread(shutil.rmtree, carry_dir, ignore_errors=True)


async def source_datasets(run: dict[str, Any]) -> list[str]:
    """The datasets a run's outputs are computed from: those it staged, those its staged Drive files were
    computed from (an output staged into another run keeps its tags), and for a flow's step those of every
    earlier step (their conclusions and named outputs reached it). Drive shows the outputs only to people
    who may read every one of them (records/visibility.py)."""
    if run.get("flow_id") is not None:
        return await flows.step_sources(run)
    return sorted(await staged_sources(run))


async def record_result(
    run: dict[str, Any], result: Any, out_dir: Path, *, seconds: float | None = None
) -> str:
    """Charge, then store what came back. The charge comes first and reads nothing the guest chose (only
    a clock and the approved limits): no output name, actions.json entry or other hostile output can end a
    run uncharged. `seconds`: the run time charged, measured by the API (a fleet run: `service.api_seconds`);
    None for the embedded worker, whose own sandbox call timed it. Storing outputs and turning actions into
    items cannot raise past here: a file Drive refuses becomes a rejected file, an actions.json that cannot
    become items becomes none."""
    run_id, company_id = run["id"], run["company"]
    actor = audit.run_actor(run_id)
    if seconds is None:
        seconds = max(0.0, (result.timings_ms.total or 0) / 1000)
    charged = await credits.charge(
        company_id=company_id,
        user_id=run["requested_by"],
        run_id=run_id,
        run_title=run["title"],
        vcpus=run["limits"]["vcpus"],
        memory_mib=run["limits"]["memory_mib"],
        seconds=seconds,
        actor=actor,
        flow_id=run.get("flow_id"),
        flow_title=await flows.flow_title(run.get("flow_id")),
        reserved_credits=run.get("credits_reserved"),
    )
    # what its printed output, files and conclusion are computed from, kept with its charge (one UPDATE)
    # before any of them is stored
    sources: list[str] | None = None
    unsourced: Exception | None = None
    try:
        sources = await source_datasets(run)
    except Exception as exc:  # our fault, not the run's: it ends `error` below, charged once
        unsourced = exc
    charged_values: dict[Any, Any] = {Run.credits_charged: charged, Run.updated_at: clock.now()}
    if sources is not None:
        charged_values[Run.source_datasets] = sources
    await Run.update(charged_values).where(Run.id == run_id)
    if run.get("flow_id") is not None:  # its conclusion and what later steps receive, or the step fails
        await flows.collect(run, result, out_dir)
    status, error = result.status, result.error
    folder_id, outputs, note = None, [], None
    company: dict[str, Any] | None = None  # read with the requester: what telling them needs
    counts = {"pending": 0}
    try:
        if unsourced is not None:
            raise unsourced
        run = {**run, "source_datasets": sources}
        requester = await load_user_context(run["requested_by"])
        company = requester.company
        folder_id, outputs = await _store_outputs(run, result, out_dir, requester, actor)
        note = await _ingest_actions(run, result, requester, counts)
    except Exception as exc:  # our fault, not the run's: the run still ends, charged once
        log.exception("storing the outputs of run %s failed", run_id)
        status, error = (
            RunStatus.error,
            f"its outputs could not be stored ({type(exc).__name__}); see the server log",
        )
    stored = result.model_dump(mode="json", exclude={"actions"})  # printed output already capped and marked
    finished = end_entry(
        "run.finished",
        actor,
        run,
        {
            "status": status,
            "exit_code": result.exit_code,
            "outputs": outputs,
            "rejected_files": [r.model_dump() for r in result.rejected_files],
            "actions": None if result.actions is None else len(result.actions),
            "actions_discarded": bool(result.actions_discarded),
            "vm": result.vm.model_dump(mode="json"),
            # a fleet host's account of its VM (virtualization, interfaces, image) is its own word
            **({"vm_self_reported_by": run["host_id"]} if run.get("host_id") else {}),
            "credits": charged,
            "source_datasets": run.get("source_datasets"),
        },
    )
    await finish(
        run_id,
        status,
        entry=finished,
        result=stored,
        error_message=error,
        output_folder_id=folder_id,
        credits_charged=charged,
        actions_discarded=bool(result.actions_discarded),
        actions_note=note,
        known=(run, company) if company is not None else None,
    )
    if counts["pending"] and status == RunStatus.succeeded:
        await tell_changes(run, counts["pending"], company)
    return status


async def tell_changes(run: dict[str, Any], pending: int, company: dict[str, Any] | None = None) -> None:
    """`pending` proposed changes of a run wait: whoever may decide them (its requester, the company's admins)
    is told. `company`: its row when read already (nothing is read when nothing is sent)."""
    flow = run.get("flow_id")
    notice = notify.Notice(
        event="changes.awaiting_decision",
        company_id=run["company"],
        subject_type="run",
        subject_id=run["id"],
        path=f"/flows/{flow}" if flow is not None else f"/runs/{run['id']}",
        count=pending,
    )
    await notify.emit(notice, lambda: notify.approvers(run["company"], run["requested_by"]), company=company)


async def _store_outputs(
    run: dict[str, Any], result: Any, out_dir: Path, requester: Any, actor: str
) -> tuple[int | None, list[dict[str, Any]]]:
    """Each output file into the run's Drive folder. A file Drive refuses (its name, its size) is listed
    with the rejected files instead: one hostile output never stops the others or the run's end."""
    if not result.files:
        return None, []
    run_id = run["id"]
    sources = run["source_datasets"]
    folder = await drive.create_folder(
        requester,
        f"Run {run_id} — {run['title']}"[:200],
        visibility="private",
        run_id=run_id,
        source_datasets=sources,
    )
    outputs = []
    kept = []
    for f in result.files:
        name = str(f.name)
        try:
            path = out_dir / name
            if not path.is_file():
                continue
            row = await drive.upload(
                requester,
                name,
                await asyncio.to_thread(path.read_bytes),  # up to the sandbox's 50 MB of outputs
                folder_id=folder["id"],
                folder_checked=True,  # made by the requester just now: not read again for every file
                visibility="private",
                run_id=run_id,
                audit_actor=actor,
                source_datasets=sources,
            )
        except (AppError, OSError, ValueError) as exc:
            reason = exc.detail if isinstance(exc, AppError) else f"{type(exc).__name__}: {exc}"
            result.rejected_files.append(
                RejectedFile(name=name[:300], reason=f"not stored: {str(reason)[:300]}")
            )
            continue
        kept.append(f)
        outputs.append({"name": row["name"], "sha256": row["sha256"], "drive_file_id": row["id"]})
    result.files = kept
    return folder["id"], outputs


async def _ingest_actions(
    run: dict[str, Any], result: Any, requester: Any, counts: dict[str, int]
) -> str | None:
    """actions.json → items; the note says why it became none (rejected by the sandbox, or entries the
    database cannot hold). Items are all or nothing: a failure part-way removes those already made."""
    if not run["read_actions"]:
        return None
    note = next((r.reason for r in result.rejected_files if r.name == "actions.json"), None)
    if result.status != "succeeded" or result.actions is None:
        return note
    if run.get("flow_id") is not None and (over := await flows.action_cap_problem(run, len(result.actions))):
        return over
    try:
        await actions.ingest(run, result.actions, requester, counts)
    except Exception as exc:
        log.warning("run %s: actions.json could not become items: %r", run["id"], exc)
        await ActionItem.delete().where(ActionItem.run == run["id"])
        await Run.update({Run.action_items_count: 0}).where(Run.id == run["id"])
        return f"actions.json could not be turned into items ({type(exc).__name__}); none were kept"
    return note


async def recover() -> int:
    """At start: a run (or a re-run for evidence) left `running` by a dead service becomes `error`, and no VM
    of ours survives."""
    stuck = await Run.select(Run.id, Run.company, Run.bundle_dir).where(Run.status == RunStatus.running)
    for row in stuck:
        await asyncio.to_thread(remove_bundle, row["bundle_dir"])
        await finish(
            row["id"],
            RunStatus.error,
            entry=end_entry("run.recovered", "system", row, {"status": RunStatus.error}),
            error_message="the service stopped while this run was running; no output was kept",
        )
    await rerun.recover_reruns()  # a re-run for evidence left running ends `error` too
    if moved := await flows.resume_stalled():
        log.warning("flows left between two steps moved on: %s", moved)
    try:
        removed = await asyncio.to_thread(sandbox.recover_leftovers)
        if removed:
            log.warning("removed leftover sandbox resources: %s", removed)
    except Exception:  # libvirt down: runs will fail with a clear error, the API still serves
        log.exception("sandbox crash recovery failed")
    return len(stuck)
