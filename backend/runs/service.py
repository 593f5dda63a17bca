"""Proposal, approval, rejection, revision: the write side of runs, as the API asks for them (who may, what
was shown); the decisions themselves are approval.py's. Reading is read.py, execution backend/execution."""

from __future__ import annotations

import asyncio
from typing import Any

from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import Conflict, Forbidden, Invalid, PaymentRequired
from backend.hashing import sha256_text
from backend.runs import approval, followups, gates, notices, proposal
from backend.runs.factory import create_run
from backend.runs.proposal import (
    Proposal,
    Proposer,
    StepSpec,
    check_bounds,
    check_code,
    code_findings,
    stage_bundle,
)
from backend.runs.read import Known, can_decide, detail, get_run_row, max_attempts, present
from backend.runs.schemas import PersonRef, RunDetail
from backend.runs.tables import RETRYABLE, ApprovalKind, Run, RunStatus
from backend.staging.bundle import remove_bundle
from backend.tenancy.context import UserContext


def refuse_flow_step(row: dict[str, Any], doing: str) -> None:
    """A flow's step is approved, rejected and proposed again with its flow, never on its own."""
    if row["flow_id"] is not None:
        raise Conflict(
            f"run {row['id']} is step {row['flow_step']} of flow {row['flow_id']}; {doing}",
            code="flow_step",
        )


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
    """The assistant proposes one run (backend/runs/proposal.py); a follow-up may then skip approval. The
    answer is built from what was just made and read, not read again."""
    made = await proposal.propose(
        Proposal(
            by=Proposer.assistant,
            ctx=ctx,
            conversation_id=conversation_id,
            title=title,
            plan=plan,
            steps=[StepSpec(title=title, code=code, datasets=datasets, file_ids=file_ids, limits=limits)],
            actor=actor or ctx.actor,
            followup_of=followup_of,
        )
    )
    (run,) = made.runs
    row = run.to_dict()
    if followup_of is not None:
        row.update(await _followup(ctx, made.company, run, followup_of))
    # its gate just passed: code execution is on and the pool holds a run, so nothing blocks an approval
    known = Known(
        company=made.company,
        requester=PersonRef(id=ctx.user_id, email=ctx.email, name=ctx.name),
        blocked=None,
    )
    await notices.awaiting_approval(row, made.company)  # queued, never awaited past the outbox's insert
    return await present(ctx, row, known=known, figures=made.balance)  # the balance its gate read


async def _followup(ctx: UserContext, company: dict[str, Any], run: Run, followup_of: int) -> dict[str, Any]:
    """A follow-up skips approval only inside the grant a person's approval of `followup_of` gave (same
    user, same conversation, unexpired, runs left, scope a subset); otherwise it waits, saying why. Returns
    what changed on its row."""
    run_id = run.id
    note = await followups.admit(ctx, company, followup_of, run)
    if note is None:
        try:
            return await approval.approve_run(
                run_id,
                kind=ApprovalKind.followup,
                by=f"followup:{followup_of}",
                company_id=ctx.company_id,
                narrowed_from=followup_of,
                actor="system",
            )
        # inside its grant, but the pool cannot hold its maximum cost (or the approval was refused)
        except (PaymentRequired, approval.NotApprovable) as exc:
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
    return {"followup_note": note}


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
    company = await gates.require_code_execution(ctx.company_id, ctx)
    if code_sha256 != sha256_text(row["code"]):
        raise Conflict(
            "the code changed since you looked at it; reload and review it again", code="hash_mismatch"
        )
    if bundle_sha256 != row["bundle_sha256"]:
        raise Conflict(
            "the staged data changed since you looked at it; reload and review it again", code="hash_mismatch"
        )
    await approval.approve_run(
        run_id,
        kind=ApprovalKind.person,
        by=ctx.email,
        company_id=ctx.company_id,
        actor=ctx.actor,
        via=ctx.via(),
        row=row,
        company=company,
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
    await approval.reject_run(ctx, run_id, reason)
    # only the winner reaches here: a rejection that lost to an approval keeps the bundle the run needs
    await asyncio.to_thread(remove_bundle, row["bundle_dir"])
    return await detail(ctx, run_id)


async def revise(ctx: UserContext, run_id: int, *, code: str, plan: str | None = None) -> RunDetail:
    row = await get_run_row(ctx, run_id)
    refuse_flow_step(
        row, "propose the flow again with the corrected step: a new flow is approved again, every step of it"
    )
    await gates.require_code_execution(ctx.company_id, ctx)  # the row read with the caller this request
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
    figures = await credits.require_minimum(ctx.company_id)  # what the answer shows, not read again
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
    made = new.to_dict()
    await notices.awaiting_approval(made, ctx.company)
    # built from what was just made and the balance read above, not read again (as a proposal's answer)
    return await present(ctx, made, figures=figures)
