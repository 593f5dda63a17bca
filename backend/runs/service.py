"""Proposal, approval, rejection, revision: the write side of runs. Reading is read.py, execution backend/worker."""

from __future__ import annotations

import ast
import asyncio
import uuid
from pathlib import Path
from typing import Any

from backend import clock, decisions
from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import AppError, Conflict, Forbidden, Invalid, PaymentRequired
from backend.hashing import sha256_text
from backend.injection import scan_text
from backend.runs import followups, gates, holds, limits, queued
from backend.runs.factory import create_run
from backend.runs.read import can_decide, detail, get_run_row, max_attempts
from backend.runs.schemas import RunDetail
from backend.runs.tables import RETRYABLE, ApprovalKind, Run, RunStatus
from backend.settings import get_settings
from backend.staging import service as staging
from backend.tenancy.context import UserContext


class CodeTooLarge(AppError):
    status_code = 413
    code = "code_too_large"


class TooManyPending(AppError):
    status_code = 429
    code = "too_many_pending_runs"


async def check_pending(ctx: UserContext, runs: int = 1) -> None:
    """A cap on proposals awaiting a decision, per user: each holds staged company data on disk and cost a
    conversion of every file it names, so an assistant in a loop must not pile them up. A proposal adds
    `runs` (a flow, one per step)."""
    cap = get_settings().max_pending_runs_per_user
    waiting = await Run.count().where(
        (Run.requested_by == ctx.user_id) & (Run.status == RunStatus.awaiting_approval)
    )
    if waiting + runs > cap:
        adds = f" and this flow's {runs} steps would make {waiting + runs}" if runs > 1 else ""
        raise TooManyPending(
            f"{waiting} of your runs are already waiting for approval{adds} (the limit is {cap}); "
            "approve or reject some of them before proposing more"
        )


def refuse_flow_step(row: dict[str, Any], doing: str) -> None:
    """A flow's step is approved, rejected and proposed again with its flow, never on its own."""
    if row["flow_id"] is not None:
        raise Conflict(
            f"run {row['id']} is step {row['flow_step']} of flow {row['flow_id']}; {doing}",
            code="flow_step",
        )


def check_code(code: str) -> None:
    limit = get_settings().max_code_bytes
    size = len(code.encode("utf-8"))
    if size > limit:
        raise CodeTooLarge(f"the code is {size:,} bytes; the limit is {limit:,} bytes")
    if not code.strip():
        raise Invalid("the code is empty")
    try:
        ast.parse(code, filename="run.py")
    except SyntaxError as exc:
        raise Invalid(
            {
                "message": f"syntax error: {exc.msg} (line {exc.lineno})",
                "line": exc.lineno,
                "offset": exc.offset,
            },
            code="syntax_error",
        ) from exc


def code_findings(code: str) -> list[dict[str, Any]]:
    """Invisible or bidi-control characters in the code itself: what the approver reads is not what runs."""
    return [f.model_dump() for f in scan_text(code, path="run.py") if f.category == "invisible_characters"]


def check_limits(limits: dict[str, Any] | None) -> dict[str, int]:
    s = get_settings()
    caps = {"wall_seconds": s.max_wall_seconds, "memory_mib": s.max_memory_mib, "vcpus": s.max_vcpus}
    out = dict(caps)
    for key, value in (limits or {}).items():
        if key not in caps:
            raise Invalid(f"unknown limit {key!r}; valid: {sorted(caps)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Invalid(f"limit {key} must be a positive whole number")
        if value > caps[key]:
            raise Invalid(
                f"limit {key}={value} is above the operator cap of {caps[key]}; a run may only lower limits"
            )
        out[key] = value
    if out["memory_mib"] < 256:
        raise Invalid("memory_mib must be at least 256")
    return out


def bundle_root() -> Path:
    return get_settings().data_dir / "bundles"


async def stage_bundle(
    ctx: UserContext, datasets: list[str], file_ids: list[int], *, allow_empty: bool = False, staged: int = 0
) -> staging.StagedBundle:
    """Stage a proposal's bundle within the user's and the company's limits on staged bytes on disk: refused
    before staging when either is at its limit already (with the `staged` bytes of a flow's earlier steps,
    not saved yet), and the new bundle deleted again when it goes over."""
    await limits.check_staged(ctx, staged)
    directory = bundle_root() / uuid.uuid4().hex
    bundle = await staging.stage(ctx, datasets, file_ids, directory, allow_empty=allow_empty)
    try:
        await limits.check_staged(ctx, staged, bundle=max(1, limits.bundle_bytes(bundle.manifest)))
    except BaseException:
        await asyncio.to_thread(staging.remove_bundle, bundle.directory)
        raise
    return bundle


async def check_bounds(ctx: UserContext, runs: int = 1) -> None:
    """What every proposal (and revision) passes before anything is staged: the per-user cap on runs
    waiting for a decision, and the per-user and per-company proposals per hour, counting the `runs` it
    is about to make (a flow's steps are runs)."""
    await check_pending(ctx, runs)
    await limits.check_rate(ctx, runs)


async def propose(
    ctx: UserContext,
    *,
    conversation_id: str,
    title: str,
    plan: str,
    code: str,
    datasets: list[str],
    file_ids: list[int],
    limits: dict[str, Any] | None = None,
    actor: str | None = None,
    followup_of: int | None = None,
) -> RunDetail:
    company = await gates.require_code_execution(ctx.company_id)
    await asyncio.to_thread(check_code, code)  # parses up to max_code_bytes: off the event loop
    run_limits = check_limits(limits)
    staging.check_datasets(ctx, datasets)
    await credits.require_minimum(ctx.company_id)
    await check_bounds(ctx)
    bundle = await stage_bundle(ctx, datasets, file_ids)
    findings = [f.model_dump() for f in bundle.findings] + await asyncio.to_thread(code_findings, code)
    datasets = list(dict.fromkeys(d.strip() for d in datasets if d.strip()))
    file_ids = list(dict.fromkeys(file_ids))
    run = await create_run(
        company_id=ctx.company_id,
        requested_by=ctx.user_id,
        conversation_id=conversation_id,
        title=title,
        plan=plan,
        code=code,
        datasets=datasets,
        file_ids=file_ids,
        limits=run_limits,
        bundle=bundle,
        findings=findings,
    )
    actor = actor or ctx.actor
    await audit.record(
        "run.proposed",
        actor=actor,
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=run.id,
        data={
            "title": title,
            "conversation_id": conversation_id,
            "code_sha256": run.code_sha256,
            "bundle_sha256": run.bundle_sha256,
            "datasets": datasets,
            "file_ids": file_ids,
            "limits": run_limits,
            "findings": len(bundle.findings),
            "followup_of": followup_of,
        },
    )
    if followup_of is not None:
        await _followup(ctx, company, run, followup_of)
    return await detail(ctx, run.id)


async def _followup(ctx: UserContext, company: dict[str, Any], run: Run, followup_of: int) -> None:
    """A follow-up skips approval only inside the grant a person's approval of `followup_of` gave (same
    user, same conversation, unexpired, runs left, scope a subset); otherwise it waits, saying why."""
    run_id = run.id
    note = await followups.admit(ctx, company, followup_of, run)
    if note is None:
        try:
            await _approve_row(
                run_id,
                kind=ApprovalKind.followup,
                by=f"followup:{followup_of}",
                company_id=ctx.company_id,
                narrowed_from=followup_of,
                actor="system",
            )
            return
        except PaymentRequired as exc:  # inside its grant, but the pool cannot hold its maximum cost
            note = str(exc.detail)
    await Run.update({Run.followup_note: note}).where(Run.id == run_id)
    await audit.record(
        "run.followup_needs_approval",
        actor="system",
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=run_id,
        data={"followup_of": followup_of, "reason": note},
    )


async def _approve_row(
    run_id: int,
    *,
    kind: ApprovalKind,
    by: str,
    company_id: int,
    narrowed_from: int | None = None,
    actor: str,
    via: dict[str, Any] | None = None,
) -> None:
    row = await Run.select().where(Run.id == run_id).output(load_json=True).first()
    assert row is not None
    now = clock.now()
    # only a person's approval grants follow-ups (per the company setting at this moment)
    person = kind == ApprovalKind.person
    grant = followups.grant_fields(await gates.company(company_id), now) if person else {}
    data: dict[str, Any] = {
        "code_sha256": sha256_text(row["code"]),
        "bundle_sha256": row["bundle_sha256"],
        "by": by,
        **(via or {}),
    }
    if grant.get(Run.followup_grant_expires_at) is not None:
        data["followup_grant"] = {
            "expires_at": grant[Run.followup_grant_expires_at].isoformat(),
            "max_runs": grant[Run.followup_grant_max_runs],
        }
    action = "run.approved"
    if narrowed_from is not None:
        action = "run.followup_auto_approved"
        data["narrowed_from_run"] = narrowed_from
    async with audit.atomic():  # its maximum cost held against the pool, or 402 and nothing changes
        (data["credits_reserved"],) = await holds.reserve(company_id, [row])
        await _claim(
            run_id,
            {
                Run.status: RunStatus.queued,
                Run.credits_reserved: data["credits_reserved"],
                Run.approval_kind: kind,
                Run.approved_by: by,
                Run.approved_at: now,
                Run.approved_code_sha256: sha256_text(row["code"]),
                Run.approved_bundle_sha256: row["bundle_sha256"],
                Run.narrowed_from: narrowed_from,
                Run.updated_at: now,
                **grant,
            },
        )
        await audit.record(
            action, actor=actor, company_id=company_id, subject_type="run", subject_id=run_id, data=data
        )
    queued.announce()


async def _claim(run_id: int, values: dict[Any, Any]) -> None:
    """Decide a waiting run (callers run this inside `audit.atomic()` with their entry): a lost decision
    changes nothing and is not audited."""
    await decisions.claim(
        Run,
        run_id,
        values,
        status=Run.status,
        waiting=RunStatus.awaiting_approval,
        lost=f"run {run_id} was decided by someone else meanwhile; nothing was changed",
    )


async def approve(ctx: UserContext, run_id: int, *, code_sha256: str, bundle_sha256: str) -> RunDetail:
    """A person approves exactly the code and the staged data they were shown: both hashes are required
    and must match what is stored now."""
    ctx.require_person("approving a run")
    if not code_sha256 or not bundle_sha256:
        raise Invalid(
            "approving needs code_sha256 and bundle_sha256: the hashes of the code and of the staged data "
            "you reviewed (the approval screen shows and sends them)",
            code="hashes_required",
        )
    row = await get_run_row(ctx, run_id)
    refuse_flow_step(row, f"approve the flow instead (/api/flows/{row['flow_id']}/approve)")
    if not can_decide(ctx, row):
        raise Forbidden("only the person who asked for this run or a company admin can approve it")
    if row["status"] != RunStatus.awaiting_approval:
        raise Conflict(f"run {run_id} is {row['status']}, not awaiting approval")
    await gates.require_code_execution(ctx.company_id)
    if code_sha256 != sha256_text(row["code"]):
        raise Conflict(
            "the code changed since you looked at it; reload and review it again", code="hash_mismatch"
        )
    if bundle_sha256 != row["bundle_sha256"]:
        raise Conflict(
            "the staged data changed since you looked at it; reload and review it again", code="hash_mismatch"
        )
    await _approve_row(
        run_id,
        kind=ApprovalKind.person,
        by=ctx.email,
        company_id=ctx.company_id,
        actor=ctx.actor,
        via=ctx.via(),
    )
    return await detail(ctx, run_id)


async def reject(ctx: UserContext, run_id: int, reason: str | None) -> RunDetail:
    ctx.require_person("rejecting a run")
    row = await get_run_row(ctx, run_id)
    refuse_flow_step(row, f"reject the flow instead (/api/flows/{row['flow_id']}/reject)")
    if not can_decide(ctx, row):
        raise Forbidden("only the person who asked for this run or a company admin can reject it")
    if row["status"] != RunStatus.awaiting_approval:
        raise Conflict(f"run {run_id} is {row['status']}, not awaiting approval")
    now = clock.now()
    async with audit.atomic():
        await _claim(
            run_id,
            {
                Run.status: RunStatus.rejected,
                Run.rejected_by: ctx.email,
                Run.rejected_at: now,
                Run.rejection_reason: (reason or "").strip()[:2000] or None,
                Run.updated_at: now,
            },
        )
        await audit.record(
            "run.rejected",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="run",
            subject_id=run_id,
            data={"reason": reason or "", **ctx.via()},
        )
    # only the winner reaches here: a rejection that lost to an approval keeps the bundle the run needs
    await asyncio.to_thread(staging.remove_bundle, row["bundle_dir"])
    return await detail(ctx, run_id)


async def revise(ctx: UserContext, run_id: int, *, code: str, plan: str | None = None) -> RunDetail:
    row = await get_run_row(ctx, run_id)
    refuse_flow_step(
        row, "propose the flow again with the corrected step: a new flow is approved again, every step of it"
    )
    await gates.require_code_execution(ctx.company_id)
    if row["requested_by"] != ctx.user_id:
        raise Forbidden("only the assistant of the person who asked for this run can revise it")
    if row["status"] not in RETRYABLE:
        raise Conflict(f"run {run_id} is {row['status']}; only a failed attempt can be revised")
    root = row["root_run_id"] or row["id"]
    latest = (
        await Run.select(Run.id, Run.attempt)
        .where(Run.root_run_id == root)
        .order_by(Run.attempt, ascending=False)
        .first()
    )
    if latest and latest["id"] != run_id:
        raise Conflict(f"run {run_id} is not the latest attempt; revise run {latest['id']} instead")
    cap = max_attempts()
    if row["attempt"] >= cap:
        raise Conflict(
            f"this run has used all {cap} attempts; propose a new run instead", code="attempts_exhausted"
        )
    await asyncio.to_thread(check_code, code)
    await credits.require_minimum(ctx.company_id)
    await check_bounds(ctx)
    bundle = await stage_bundle(ctx, row["datasets"], row["file_ids"])
    code_found = await asyncio.to_thread(code_findings, code)
    new = await create_run(
        company_id=ctx.company_id,
        requested_by=ctx.user_id,
        conversation_id=row["conversation_id"],
        title=row["title"],
        plan=plan if plan is not None else row["plan"],
        code=code,
        datasets=row["datasets"],
        file_ids=row["file_ids"],
        limits=row["limits"],
        bundle=bundle,
        findings=[f.model_dump() for f in bundle.findings] + code_found,
        attempt=row["attempt"] + 1,
        root_run_id=root,
        previous_attempt_id=run_id,
    )
    await audit.record(
        "run.revised",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=new.id,
        data={
            "previous_attempt": run_id,
            "attempt": new.attempt,
            "code_sha256": new.code_sha256,
            "bundle_sha256": new.bundle_sha256,
        },
    )
    return await detail(ctx, new.id)
