"""Re-run for evidence (issue 28, item 5), opt-in.

A company admin chooses, as a data-retention setting, to keep approved bundles for N days after their run
(`evidence_retention_days`, 0 by default: a bundle goes when its run ends, as before). While a run's bundle
is kept, a company admin or an auditor, signed in, may re-execute the exact approved code over the exact
bundle in a fresh VM; the worker checks both hashes against the approval again first (the runner's own
check), and runs it with its actions discarded unread (as a scheduled firing does): no action item, no
proposed change, no record touched, and nothing filed in Drive. The page then says whether the printed
output and each output file's sha256 match the original run's.

Never the assistant's token (the handler does not open to it), never a member, never another company's
person. Not charged: a re-run is an audit check, not the company's work, so it draws nothing from the credit
pool and is bounded instead (one re-run at a time per company, held on the company's row so it holds across
API processes; at most `rerun_daily_budget` a company in 24 hours; under the original run's own limits); the
request's and the result's audit entries say `charged: false`. Only runs whose VM ran keep a bundle, and not a
flow's steps (what earlier steps handed them is not kept). In a fleet (`CLEANROOM_WORKERS=fleet`) re-runs are
refused: the hypervisor hosts take runs only.

This module holds the policy (what is kept, until when), the request and the reads; the worker executes a
queued re-run (backend/execution/rerun.py) through the same sandbox call and hash check as a run.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from backend import clock
from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import Conflict, Forbidden, NotFound
from backend.evidence.tables import IN_FLIGHT, EvidenceRerun, RerunStatus
from backend.hashing import sha256_text
from backend.runs import gates, queued
from backend.runs.read import contents_withheld
from backend.runs.sources import run_sources
from backend.runs.tables import RETRYABLE, Run, RunStatus
from backend.settings import get_settings
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Company

# the statuses of a run whose VM ran: only those keep a bundle for evidence
KEPT_STATUSES = (RunStatus.succeeded, *RETRYABLE)
NOT_CHARGED = {"charged": False, "credits": 0}


def kept_for_evidence(status: str | None, flow_id: int | None, days: int | float | None) -> bool:
    """Whether a run that ended with `status` keeps its bundle for evidence under `days` of retention."""
    return bool(days and days > 0) and flow_id is None and status in KEPT_STATUSES


async def evidence_days(company_id: int) -> int:
    row = await Company.select(Company.evidence_retention_days).where(Company.id == company_id).first()
    return int(row["evidence_retention_days"] or 0) if row else 0


def kept_until(run: dict[str, Any], days: int) -> datetime | None:
    """Until when this run's bundle is kept for evidence under the company's current setting, or None."""
    if not kept_for_evidence(run["status"], run["flow_id"], days) or run["finished_at"] is None:
        return None
    return run["finished_at"] + timedelta(days=days)


def unavailable(run: dict[str, Any], days: int, company: dict[str, Any]) -> tuple[str, str] | None:
    """Why this run cannot be re-run now, as (code, message), or None."""
    if get_settings().workers == "fleet":
        return (
            "rerun_unavailable",
            "re-runs for evidence run on the embedded worker; in a fleet the hypervisor hosts take runs only",
        )
    if not company["code_execution_enabled"]:
        return "code_execution_disabled", "code execution is turned off for this company"
    if days <= 0:
        return (
            "evidence_retention_off",
            "this company keeps no bundles for evidence (Settings › Data retention, 0 days): a re-run needs "
            "the exact approved bundle, and it went when the run ended",
        )
    if run["flow_id"] is not None:
        return (
            "bundle_not_kept",
            "a flow's step is not re-run: what the earlier steps handed it is not kept",
        )
    if run["status"] not in KEPT_STATUSES or run["started_at"] is None:
        return "bundle_not_kept", f"this run never ran in a VM (it is {run['status']}): no bundle was kept"
    until = kept_until(run, days)
    if until is None or until <= clock.now():
        return (
            "bundle_not_kept",
            f"this run's bundle is no longer kept: the company keeps bundles {days} days, and it ended "
            f"{run['finished_at']:%Y-%m-%d %H:%M} UTC",
        )
    if not run["bundle_dir"] or not os.path.isdir(run["bundle_dir"]):
        return "bundle_not_kept", "this run's bundle is no longer on disk (it was deleted when the run ended)"
    return None


async def _run_for(ctx: UserContext, run_id: int) -> dict[str, Any]:
    """A run of the caller's company, for a company admin or an auditor signed in as a person; else refused."""
    if not ctx.is_person:
        raise Forbidden(
            {
                "message": "a re-run for evidence is a person's request: sign in to the console (an admin or "
                "an auditor); an API token (the assistant's) may not ask for one",
                "token_id": ctx.token_id,
            },
            code="person_required",
        )
    if not ctx.sees_company_history:
        raise Forbidden(
            "only a company admin or an auditor can re-run a run for evidence", code="admin_or_auditor_only"
        )
    row = (
        await Run.select()
        .where((Run.id == run_id) & (Run.company == ctx.company_id))
        .output(load_json=True)
        .first()
    )
    if row is None:
        raise NotFound(f"no run {run_id}")
    return row


async def request(ctx: UserContext, run_id: int) -> dict[str, Any]:
    """Queue a re-run of `run_id` (audited); refused with a clear error when its bundle is not kept."""
    run = await _run_for(ctx, run_id)
    company = await gates.require_feature(ctx.company_id)
    days = int(company["evidence_retention_days"] or 0)
    why = unavailable(run, days, company)
    if why is None:
        # the company's row held to the commit: the look at what is in flight (and spent today) and the insert
        # are one step for every API process (two requests at once, in one process or two, queue one)
        async with audit.atomic():  # the row and its entry land together or not at all
            await credits.lock_company(ctx.company_id)
            why = await _busy_or_spent(ctx.company_id)
            if why is None:
                row = await _queue(ctx, run_id, run)
    if why is not None:
        code, message = why
        await audit.record(
            "run.rerun_refused",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="run",
            subject_id=run_id,
            data={"reason": code, "message": message, **ctx.via()},
        )
        raise Conflict(message, code=code)
    queued.announce()  # the worker picks re-runs up with runs
    return await get(ctx, run_id, row.id)


BUDGET_WINDOW = timedelta(days=1)


async def _busy_or_spent(company_id: int) -> tuple[str, str] | None:
    """Why the company may not queue another re-run now (one in flight; its daily budget spent), or None.
    Called holding the company's row (`request`)."""
    if await EvidenceRerun.exists().where(
        (EvidenceRerun.company == company_id) & EvidenceRerun.status.is_in(list(IN_FLIGHT))
    ):
        return "rerun_in_progress", "a re-run of this company is queued or running; wait for it to end"
    budget = get_settings().rerun_daily_budget
    since = clock.now() - BUDGET_WINDOW
    recent = (
        await EvidenceRerun.select(EvidenceRerun.created_at)
        .where((EvidenceRerun.company == company_id) & (EvidenceRerun.created_at >= since))
        .order_by(EvidenceRerun.created_at)
    )
    if len(recent) >= budget:
        again = recent[len(recent) - budget]["created_at"] + BUDGET_WINDOW if budget else None
        return (
            "rerun_budget_spent",
            f"this company has had {len(recent)} re-runs for evidence in the last 24 hours; the service allows "
            f"{budget} a day (re-runs are not charged)"
            + (f"; the next is possible from {again:%Y-%m-%d %H:%M} UTC" if again else ""),
        )
    return None


async def _queue(ctx: UserContext, run_id: int, run: dict[str, Any]) -> EvidenceRerun:
    """The re-run's row and its `run.rerun_requested` entry (inside the caller's transaction)."""
    row = EvidenceRerun(
        run=run_id,
        company=ctx.company_id,
        requested_by=ctx.user_id,
        actor=ctx.actor,
        status=RerunStatus.queued,
        created_at=clock.now(),
    )
    await row.save()
    await audit.record(
        "run.rerun_requested",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=run_id,
        data={
            "rerun_id": row.id,
            "code_sha256": run["approved_code_sha256"],
            "bundle_sha256": run["approved_bundle_sha256"],
            "actions": "discarded unread",
            **NOT_CHARGED,
            **ctx.via(),
        },
    )
    return row


def compare(original: dict[str, Any] | None, outcome: dict[str, Any]) -> dict[str, Any]:
    """What matched between the original run's stored result and a re-run's outcome: the printed output
    (by its sha256; its text is not shown here), the status and exit code, and each output file by name and
    sha256 (a file only one of them wrote is a mismatch)."""
    original = original or {}
    printed = sha256_text(original.get("stdout") or "") == outcome["stdout_sha256"] and bool(
        original.get("stdout_truncated")
    ) == bool(outcome.get("stdout_truncated"))
    before = {f["name"]: f["sha256"] for f in original.get("files") or []}
    after = {f["name"]: f["sha256"] for f in outcome.get("files") or []}
    files = [
        {
            "name": name,
            "original_sha256": before.get(name),
            "rerun_sha256": after.get(name),
            "match": name in before and before.get(name) == after.get(name),
        }
        for name in sorted(set(before) | set(after))
    ]
    status_match = original.get("status") == outcome.get("status")
    exit_match = original.get("exit_code") == outcome.get("exit_code")
    return {
        "printed_output_match": printed,
        "status_match": status_match,
        "exit_code_match": exit_match,
        "files": files,
        "files_matched": sum(1 for f in files if f["match"]),
        "all_match": printed and status_match and exit_match and all(f["match"] for f in files),
    }


def outcome_of(result: Any) -> dict[str, Any]:
    """What is kept of a re-run's sandbox result: hashes and facts, never the printed text or file contents."""
    return {
        "status": result.status,
        "exit_code": result.exit_code,
        "stdout_sha256": sha256_text(result.stdout or ""),
        "stdout_truncated": bool(result.stdout_truncated),
        "files": [f.model_dump() for f in result.files],
        "rejected_files": [r.model_dump() for r in result.rejected_files],
        "actions_discarded": bool(result.actions_discarded),
        "error": result.error,
        "vm": result.vm.model_dump(mode="json"),
        "timings_ms": result.timings_ms.model_dump(mode="json"),
    }


# what a re-run's outcome and comparison hold of what the code made: its files' names and hashes, its refused
# files and why, the guest's error text (the code chose them: they can carry data)
OUTCOME_CONTENTS = ("files", "rejected_files", "error")


def _public(row: dict[str, Any], withheld: str | None) -> dict[str, Any]:
    """A re-run as shown; `withheld` (runs.read.contents_withheld of its run for the reader): without what
    the code made, only whether it matched."""
    outcome = dict(row["outcome"] or {})
    outcome.pop("stdout_sha256", None)  # an auditor does not see what someone's run printed, nor its hash
    comparison = row["comparison"]
    if withheld:
        outcome = {k: v for k, v in outcome.items() if k not in OUTCOME_CONTENTS}
        comparison = {**comparison, "files": []} if comparison else comparison
    return {
        "id": row["id"],
        "run_id": row["run"],
        "status": row["status"],
        "requested_by": row["actor"],
        "requested_at": row["created_at"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "error_message": row["error_message"],
        "outcome": outcome or None,
        "comparison": comparison,
        "withheld": withheld,
        **NOT_CHARGED,
    }


async def _withheld(ctx: UserContext, run: dict[str, Any]) -> str | None:
    """Why `ctx` does not see what the run's code made: the run detail's one rule."""
    return contents_withheld(ctx, run, await run_sources(run))


async def get(ctx: UserContext, run_id: int, rerun_id: int) -> dict[str, Any]:
    run = await _run_for(ctx, run_id)
    row = (
        await EvidenceRerun.select()
        .where(
            (EvidenceRerun.id == rerun_id)
            & (EvidenceRerun.run == run_id)
            & (EvidenceRerun.company == ctx.company_id)
        )
        .output(load_json=True)
        .first()
    )
    if row is None:
        raise NotFound(f"no re-run {rerun_id} of run {run_id}")
    return _public(row, await _withheld(ctx, run))


async def overview(ctx: UserContext, run_id: int) -> dict[str, Any]:
    """A run's re-runs, newest first, with whether its bundle is kept (until when) and, if it cannot be
    re-run now, why."""
    run = await _run_for(ctx, run_id)
    company = await gates.require_feature(ctx.company_id)
    days = int(company["evidence_retention_days"] or 0)
    why = unavailable(run, days, company)
    rows = (
        await EvidenceRerun.select()
        .where((EvidenceRerun.run == run_id) & (EvidenceRerun.company == ctx.company_id))
        .order_by(EvidenceRerun.id, ascending=False)
        .output(load_json=True)
    )
    withheld = await _withheld(ctx, run)
    return {
        "run_id": run_id,
        "retention_days": days,
        "kept_until": None if why else kept_until(run, days),
        "available": why is None,
        "unavailable_code": why[0] if why else None,
        "unavailable_reason": why[1] if why else None,
        "items": [_public(r, withheld) for r in rows],
    }


async def for_pack(run_id: int, company_id: int, *, withheld: str | None) -> list[dict[str, Any]]:
    """The run's re-runs for its evidence pack, oldest first: who asked, when, and what matched (each file
    by name and hash unless `withheld`)."""
    rows = (
        await EvidenceRerun.select()
        .where((EvidenceRerun.run == run_id) & (EvidenceRerun.company == company_id))
        .order_by(EvidenceRerun.id)
        .output(load_json=True)
    )
    out = []
    for row in rows:
        public = _public(row, withheld)
        comparison = public["comparison"] or {}
        out.append(
            {
                "id": public["id"],
                "status": public["status"],
                "requested_by": public["requested_by"],
                "requested_at": public["requested_at"],
                "finished_at": public["finished_at"],
                "printed_output_match": comparison.get("printed_output_match"),
                "files": comparison.get("files") or [],
                "all_match": comparison.get("all_match"),
                "error_message": public["error_message"],
                **NOT_CHARGED,
            }
        )
    return out
