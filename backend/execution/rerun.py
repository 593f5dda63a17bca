"""A queued re-run for evidence, from queued to finished (the policy and the request: evidence/rerun.py).

The same steps as a run's, through the same functions (backend/runs/approved.py): the code and the kept
bundle are hashed again and compared with the approval, then the code runs in a fresh VM with
`read_actions=False`, so an actions.json the code writes is discarded unread. Nothing else of a run's end
happens: no charge, no Drive folder, no action item, no change to the run's row. Only hashes are kept of
what came out (backend/evidence/rerun.py `outcome_of`), compared with the original run's result.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from backend import clock
from backend.audit import service as audit
from backend.evidence import rerun as policy
from backend.evidence.tables import EvidenceRerun, RerunStatus
from backend.runs import approved, gates
from backend.runs.rows import whole_run
from backend.settings import get_settings

log = logging.getLogger("cleanroom.loop")


def rerun_actor(rerun_id: int) -> str:
    return f"worker:rerun-{rerun_id}"


async def queued_reruns() -> list[int]:
    rows = (
        await EvidenceRerun.select(EvidenceRerun.id)
        .where(EvidenceRerun.status == RerunStatus.queued)
        .order_by(EvidenceRerun.id)
    )
    return [r["id"] for r in rows]


async def _end(rerun: dict[str, Any], status: str, data: dict[str, Any], **values: Any) -> None:
    """A re-run's end and the audit entry that says so (`run.rerun_finished`), in one transaction."""
    update = {EvidenceRerun.status: status, EvidenceRerun.finished_at: clock.now()}
    for key, value in values.items():
        update[getattr(EvidenceRerun, key)] = value
    async with audit.atomic():
        await EvidenceRerun.update(update).where(EvidenceRerun.id == rerun["id"])
        await audit.record(
            "run.rerun_finished",
            actor=rerun_actor(rerun["id"]),
            company_id=rerun["company"],
            subject_type="run",
            subject_id=rerun["run"],
            data={
                "rerun_id": rerun["id"],
                "requested_by": rerun["actor"],
                "status": status,
                **data,
                **policy.NOT_CHARGED,
            },
        )


async def execute_rerun(rerun_id: int) -> str:
    """Run one queued re-run to its end. Returns its final status."""
    await EvidenceRerun.update(
        {EvidenceRerun.status: RerunStatus.running, EvidenceRerun.started_at: clock.now()}
    ).where((EvidenceRerun.id == rerun_id) & (EvidenceRerun.status == RerunStatus.queued))
    rerun = await EvidenceRerun.select().where(EvidenceRerun.id == rerun_id).first()
    if rerun is None or rerun["status"] != RerunStatus.running:
        return rerun["status"] if rerun else "missing"
    try:
        return await _execute(rerun)
    except Exception as exc:
        log.exception("re-run %s failed in the worker", rerun_id)
        message = f"internal error in the worker ({type(exc).__name__}); see the server log"
        await _end(rerun, RerunStatus.error, {"error": message}, error_message=message)
        return RerunStatus.error


async def _execute(rerun: dict[str, Any]) -> str:
    run = await whole_run(rerun["run"])
    assert run is not None
    company = await gates.company(run["company"])  # its settings now: turned off since, nothing runs
    why = policy.unavailable(run, int(company["evidence_retention_days"] or 0), company)
    problem = why[1] if why else await approved.check(approved.ApprovedJob.of(run))  # the runner's own check
    if problem:
        message = f"refused to start: {problem}"
        await _end(rerun, RerunStatus.refused, {"problem": problem}, error_message=message)
        return RerunStatus.refused
    out_dir = Path(tempfile.mkdtemp(prefix=f"cleanroom-rerun-{rerun['id']}-", dir=get_settings().data_dir))
    try:
        # actions discarded unread: a re-run proposes nothing
        result = await approved.run_approved(
            approved.ApprovedJob.of(run), out_dir, what=f"re-run {rerun['id']}", log=log, read_actions=False
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, out_dir, ignore_errors=True)
    outcome = policy.outcome_of(result)
    comparison = policy.compare(run["result"], outcome)
    await _end(
        rerun,
        RerunStatus.finished,
        {
            "vm_status": result.status,
            "exit_code": result.exit_code,
            "code_sha256": run["approved_code_sha256"],
            "bundle_sha256": run["approved_bundle_sha256"],
            "printed_output_match": comparison["printed_output_match"],
            "files": [
                {"name": f["name"], "sha256": f["rerun_sha256"], "match": f["match"]}
                for f in comparison["files"]
            ],
            "all_match": comparison["all_match"],
            "actions_discarded": outcome["actions_discarded"],
            "vm": outcome["vm"],
        },
        outcome=outcome,
        comparison=comparison,
    )
    return RerunStatus.finished


async def recover_reruns() -> int:
    """At start: a re-run left running by a dead worker ends `error` (no VM of ours survives recovery)."""
    stuck = await EvidenceRerun.select().where(EvidenceRerun.status == RerunStatus.running)
    for rerun in stuck:
        message = "the service stopped while this re-run was running"
        await _end(rerun, RerunStatus.error, {"error": message}, error_message=message)
    return len(stuck)
