"""Proposing, approving and rejecting a flow, and reading it. Its steps are runs (backend/runs): each is
staged and hashed on its own when proposed, approved with its flow, and run by the worker one at a time
(backend/flows/progress.py moves the flow from one step to the next)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from backend import clock, decisions
from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import Conflict, Forbidden, Invalid, NotFound
from backend.flows import progress
from backend.flows.schemas import (
    MAX_STEPS,
    CarriedFile,
    FlowApproval,
    FlowBody,
    FlowDetail,
    FlowPage,
    FlowStep,
    FlowSummary,
    Received,
    StepHashes,
)
from backend.flows.tables import Capability, Flow, FlowStatus
from backend.hashing import sha256_json, sha256_text
from backend.runs import approval, gates, notices, proposal
from backend.runs.proposal import Made, PlannedStep, Proposal, Proposer, StepSpec
from backend.runs.read import Known, can_decide, contents_withheld, present
from backend.runs.schemas import PersonRef, Rejection
from backend.runs.tables import Run
from backend.staging import service as staging
from backend.staging.bundle import remove_bundle
from backend.tenancy.context import UserContext
from backend.tenancy.tables import User


def flow_hash(steps: list[dict[str, Any]]) -> str:
    """One hash over what the approver sees of every step: its code and bundle hashes, its capability and
    the outputs it receives. The worker re-checks each step's code and bundle against it before its VM."""
    return sha256_json(
        [
            {
                "step": s["flow_step"],
                "code_sha256": s["code_sha256"],
                "bundle_sha256": s["bundle_sha256"],
                "capability": capability_of(s),
                "receives": s["receives"],
            }
            for s in steps
        ]
    )


def capability_of(run: dict[str, Any]) -> Capability:
    return Capability.propose_writes if run["read_actions"] else Capability.read


async def propose(ctx: UserContext, body: FlowBody, *, actor: str | None = None) -> FlowDetail:
    """The assistant proposes a flow (backend/runs/proposal.py): every step checked, then each step's bundle
    staged on its own; nothing is kept if any step is refused."""
    made = await proposal.propose(
        Proposal(
            by=Proposer.flow,
            ctx=ctx,
            conversation_id=body.conversation_id,
            title=body.title,
            plan=body.plan,
            steps=[
                StepSpec(
                    title=step.title,
                    code=step.code,
                    datasets=step.datasets,
                    file_ids=step.files,
                    limits=step.limits.model_dump(exclude_none=True) if step.limits else None,
                    receives=step.receives,
                    read_actions=step.capability == Capability.propose_writes,
                )
                for step in body.steps
            ],
            actor=actor or ctx.actor,
            max_steps=MAX_STEPS,
        ),
        FLOW,
    )
    assert made.flow_id is not None
    await notices.flow_awaiting_approval(made.flow_id, ctx.company_id, ctx.user_id, made.company)
    return await flow_detail(ctx, made.flow_id, figures=made.balance)  # the balance its gate read


class FlowMaker:
    """The one place a flow and its step runs are made: a proposal (waiting for a person), or a schedule's
    firing (approved by the schedule, every step `read`, step 1 queued at once). The flow and all its steps
    are written in one transaction: a firing's step 1 cannot end before its later steps exist (the flow
    would count as done with them left waiting), and a failure keeps nothing (the proposal removes the
    bundles)."""

    noun = "flow"

    async def create(
        self, p: Proposal, steps: list[PlannedStep], bundles: list[staging.StagedBundle], made: Made
    ) -> None:
        now = p.now or clock.now()
        schedule_id = p.schedule_id
        action_cap = made.extra.get("action_cap", made.company["flow_action_cap"])
        async with Flow._meta.db.transaction():
            flow = Flow(
                company=p.ctx.company_id,
                requested_by=p.ctx.user_id,
                conversation_id=p.conversation_id,
                title=p.title,
                plan=p.plan,
                status=FlowStatus.awaiting_approval if schedule_id is None else FlowStatus.running,
                step_count=len(steps),
                flow_sha256="",
                action_cap=action_cap,
                created_at=now,
                updated_at=now,
                schedule_id=schedule_id,
                approved_by=None if schedule_id is None else approval.fired_by(schedule_id),
                approved_at=None if schedule_id is None else now,
            )
            await flow.save()
            rows = []
            for step, bundle in zip(steps, bundles, strict=True):
                run = await proposal.create_step_run(
                    p,
                    step,
                    bundle,
                    title=step.title,
                    now=now,
                    flow_id=flow.id,
                    flow_step=step.k,
                    read_actions=step.read_actions and schedule_id is None,
                    receives=step.receives,
                )
                made.runs.append(run)
                rows.append(
                    {
                        "id": run.id,
                        "flow_step": step.k,
                        "code_sha256": run.code_sha256,
                        "bundle_sha256": run.bundle_sha256,
                        "read_actions": run.read_actions,
                        "receives": step.receives,
                    }
                )
            digest = flow_hash(rows)
            await Flow.update({Flow.flow_sha256: digest}).where(Flow.id == flow.id)
        made.flow_id = flow.id
        made.extra.update(rows=rows, flow_sha256=digest)

    async def audit(self, p: Proposal, made: Made) -> None:
        await audit.record(
            "flow.proposed" if p.schedule_id is None else "flow.scheduled_firing",
            actor=p.actor,
            company_id=p.ctx.company_id,
            subject_type="flow",
            subject_id=made.flow_id,
            data={
                "title": p.title,
                "conversation_id": p.conversation_id,
                "flow_sha256": made.extra["flow_sha256"],
                "schedule_id": p.schedule_id,
                "steps": [
                    {
                        "step": r["flow_step"],
                        "run_id": r["id"],
                        "code_sha256": r["code_sha256"],
                        "bundle_sha256": r["bundle_sha256"],
                        "capability": capability_of(r),
                        "receives": r["receives"],
                    }
                    for r in made.extra["rows"]
                ],
            },
        )


FLOW = FlowMaker()


async def get_flow_row(ctx: UserContext, flow_id: int) -> dict[str, Any]:
    """A flow the caller may see, by the rule for runs: the requester's own, or any of the company's for an
    admin or an auditor. Else 404."""
    row = await Flow.select().where((Flow.id == flow_id) & (Flow.company == ctx.company_id)).first()
    if row is None or not (ctx.sees_company_history or row["requested_by"] == ctx.user_id):
        raise NotFound(f"no flow {flow_id}")
    return row


async def contents_withheld_of_flow(ctx: UserContext, row: dict[str, Any]) -> str | None:
    """Why `ctx` does not see what a flow's steps made (by the run detail's rule, over what every step is
    computed from), or None."""
    _, inherits = await progress.flow_sources(await flow_runs(row["id"]))
    return contents_withheld(ctx, row, sorted(set().union(*inherits.values())))


async def flow_runs(flow_id: int) -> list[dict[str, Any]]:
    """Every run of the flow, by step, then oldest first."""
    return await (
        Run.select()
        .where(Run.flow_id == flow_id)
        .order_by(Run.flow_step)
        .order_by(Run.id)
        .output(load_json=True)
    )


def latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The flow's steps in order: for each step its latest run."""
    last: dict[int, dict[str, Any]] = {}
    for row in rows:
        last[row["flow_step"]] = row
    return [last[k] for k in sorted(last)]


async def step_rows(flow_id: int) -> list[dict[str, Any]]:
    """The flow's steps in order: for each step its latest run."""
    return latest(await flow_runs(flow_id))


async def _to_decide(ctx: UserContext, flow_id: int, verb: str) -> dict[str, Any]:
    """The flow a person may approve or reject now: theirs (or an admin's company's), still waiting."""
    ctx.require_person(f"{verb[:-1] if verb.endswith('e') else verb}ing a flow")
    row = await get_flow_row(ctx, flow_id)
    if not can_decide(ctx, row):
        raise Forbidden(f"only the person who asked for this flow or a company admin can {verb} it")
    if row["status"] != FlowStatus.awaiting_approval:
        raise Conflict(f"flow {flow_id} is {row['status']}, not awaiting approval")
    return row


async def _claim(flow_id: int, values: dict[Any, Any]) -> None:
    """Decide a waiting flow, conditional on it still waiting: of two decisions at once exactly one lands,
    the other gets 409 and changes nothing."""
    await decisions.claim(
        Flow,
        flow_id,
        values,
        status=Flow.status,
        waiting=FlowStatus.awaiting_approval,
        lost=f"flow {flow_id} was decided by someone else meanwhile",
    )


async def approve(ctx: UserContext, flow_id: int, hashes: list[StepHashes]) -> FlowDetail:
    """A person approves every step at once, each exactly as shown: its code and its staged data."""
    row = await _to_decide(ctx, flow_id, "approve")
    await gates.require_code_execution(ctx.company_id)
    steps = await step_rows(flow_id)
    if len(hashes) != len(steps):
        raise Invalid(
            f"the flow has {len(steps)} steps; the approval names {len(hashes)}: send the hashes of every "
            "step you reviewed, in order",
            code="hashes_required",
        )
    for step, seen in zip(steps, hashes, strict=True):
        if seen.code_sha256 != sha256_text(step["code"]):
            raise Conflict(
                f"step {step['flow_step']}: the code changed since you looked at it; reload and review it again",
                code="hash_mismatch",
            )
        if seen.bundle_sha256 != step["bundle_sha256"]:
            raise Conflict(
                f"step {step['flow_step']}: the staged data changed since you looked at it; reload and review "
                "it again",
                code="hash_mismatch",
            )

    async def claim(now: datetime) -> None:
        await _claim(
            flow_id,
            {
                Flow.status: FlowStatus.running,
                Flow.approved_by: ctx.email,
                Flow.approved_at: now,
                Flow.updated_at: now,
            },
        )

    def entry(costs: list[float]) -> dict[str, Any]:
        return {
            "action": "flow.approved",
            "actor": ctx.actor,
            "company_id": ctx.company_id,
            "subject_type": "flow",
            "subject_id": flow_id,
            "data": {
                "by": ctx.email,
                "flow_sha256": row["flow_sha256"],
                "credits_reserved": round(sum(costs), 2),
                "steps": [
                    {
                        "step": s["flow_step"],
                        "run_id": s["id"],
                        "code_sha256": sha256_text(s["code"]),
                        "bundle_sha256": s["bundle_sha256"],
                        "capability": capability_of(s),
                    }
                    for s in steps
                ],
                **ctx.via(),
            },
        }

    await approval.approve_steps(ctx, steps, claim=claim, entry=entry)
    return await flow_detail(ctx, flow_id)


async def reject(ctx: UserContext, flow_id: int, reason: str | None) -> FlowDetail:
    await _to_decide(ctx, flow_id, "reject")
    text = (reason or "").strip()[:2000] or None
    # claimed like an approval: of two people deciding at once, one wins and the other is told so (a
    # rejection that lost must not take the bundles of a flow already running)
    steps = await step_rows(flow_id)

    async def claim(now: datetime) -> None:
        await _claim(
            flow_id,
            {
                Flow.status: FlowStatus.rejected,
                Flow.rejected_by: ctx.email,
                Flow.rejected_at: now,
                Flow.rejection_reason: text,
                Flow.finished_at: now,
                Flow.updated_at: now,
            },
        )

    await approval.reject_steps(ctx, steps, reason, claim=claim, flow_id=flow_id)
    for step in steps:
        await asyncio.to_thread(remove_bundle, step["bundle_dir"])
    return await flow_detail(ctx, flow_id)


async def flow_detail(
    ctx: UserContext, flow_id: int, *, figures: credits.Balance | None = None
) -> FlowDetail:
    """A flow and its steps. What its steps share (the company, the requester, whether an approval is
    blocked now, the flow's runs and what each is computed from) is read once for the flow, not per step.
    `figures`: the company's credit balance when this request read it already (a proposal's credit gate)."""
    row = await get_flow_row(ctx, flow_id)
    runs = await flow_runs(flow_id)
    steps = latest(runs)
    company = await gates.company(ctx.company_id, ctx)
    awaiting = row["status"] == FlowStatus.awaiting_approval
    blocked = await gates.approve_blocked(company, figures) if awaiting else None
    person = await User.select(User.id, User.email, User.name).where(User.id == row["requested_by"]).first()
    known = Known(company=company, requester=PersonRef(**person), blocked=blocked)
    # stored when it was handed its carry; before that, what it will inherit, as the approver sees it
    own, inherits = await progress.flow_sources(runs)
    out_steps = []
    for step in steps:
        sources = inherits[step["id"]]
        withheld = contents_withheld(ctx, row, sources)  # the rule Drive applies to its outputs
        out_steps.append(
            FlowStep(
                step=step["flow_step"],
                title=step["title"],
                capability=capability_of(step),
                receives=[Received(**r) for r in step["receives"] or []],
                conclusion=None if withheld else step["conclusion"],
                carried=[CarriedFile(**c) for c in step["carried"]]
                if step["carried"] is not None and not withheld
                else None,
                source_datasets=sources,
                withheld=withheld,
                run=await present(ctx, step, known=known, sources=own[step["id"]]),
            )
        )
    return FlowDetail(
        id=row["id"],
        title=row["title"],
        plan=row["plan"],
        conversation_id=row["conversation_id"],
        status=row["status"],
        requested_by=known.requester,
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        flow_sha256=row["flow_sha256"],
        action_cap=row["action_cap"],
        action_items_count=sum(s["action_items_count"] or 0 for s in steps),
        approval=FlowApproval(by=row["approved_by"], at=row["approved_at"]) if row["approved_at"] else None,
        rejection=Rejection(by=row["rejected_by"], at=row["rejected_at"], reason=row["rejection_reason"])
        if row["rejected_at"]
        else None,
        schedule_id=row["schedule_id"],
        can_decide=row["status"] == FlowStatus.awaiting_approval and can_decide(ctx, row),
        approve_blocked_reason=blocked,
        credits_total=round(sum(s["credits_charged"] or 0.0 for s in steps), 4),
        steps=out_steps,
    )


async def list_flows(
    ctx: UserContext, *, status: str | None = None, limit: int = 50, offset: int = 0
) -> FlowPage:
    where: list[Any] = [Flow.company == ctx.company_id]
    if not ctx.sees_company_history:
        where.append(Flow.requested_by == ctx.user_id)
    if status:
        where.append(Flow.status == status)
    rows = await Flow.select().where(*where).order_by(Flow.id, ascending=False).limit(limit).offset(offset)
    total = await Flow.count().where(*where)
    # every step of the page's flows and their requesters in two queries, not two per flow
    ids = [row["id"] for row in rows]
    latest: dict[tuple[int, int], dict[str, Any]] = {}
    if ids:
        step_runs = (
            await Run.select(Run.flow_id, Run.flow_step, Run.status, Run.credits_charged)
            .where(Run.flow_id.is_in(ids))
            .order_by(Run.id)
        )
        for run in step_runs:  # a step's latest run wins
            latest[(run["flow_id"], run["flow_step"])] = run
    people = {
        u["id"]: PersonRef(**u)
        for u in await User.select(User.id, User.email, User.name).where(
            User.id.is_in(list({r["requested_by"] for r in rows}) or [0])
        )
    }
    items = []
    for row in rows:
        steps = [latest[key] for key in sorted(k for k in latest if k[0] == row["id"])]
        items.append(
            FlowSummary(
                id=row["id"],
                title=row["title"],
                status=row["status"],
                conversation_id=row["conversation_id"],
                requested_by=people[row["requested_by"]],
                step_count=row["step_count"],
                step_statuses=[s["status"] for s in steps],
                created_at=row["created_at"],
                finished_at=row["finished_at"],
                credits_total=round(sum(s["credits_charged"] or 0.0 for s in steps), 4),
            )
        )
    return FlowPage(items=items, total=total)
