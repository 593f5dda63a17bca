"""Proposing, approving and rejecting a flow, and reading it. Its steps are runs (backend/runs): each is
staged and hashed on its own when proposed, approved with its flow, and run by the worker one at a time
(backend/flows/progress.py moves the flow from one step to the next)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from backend import clock, decisions
from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import AppError, Conflict, Forbidden, Invalid, NotFound
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
from backend.records.visibility import unreadable_sources
from backend.runs import gates, holds, queued
from backend.runs import service as runs
from backend.runs.factory import create_run
from backend.runs.limits import bundle_bytes
from backend.runs.read import auditor_withholds, can_decide, detail, withheld_reason
from backend.runs.schemas import PersonRef, Rejection
from backend.runs.sources import run_sources
from backend.runs.tables import ApprovalKind, Run, RunStatus
from backend.staging import service as staging
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Company, User

# an output a step hands on: a plain file name in /work/output (no folders), as the sandbox collects them
_OUTPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,199}$")


@contextlib.contextmanager
def for_step(k: int, title: str) -> Iterator[None]:
    """A refusal raised while checking or staging step k says which step it was about."""
    try:
        yield
    except AppError as exc:
        detail = exc.detail
        prefix = f"step {k} ({title}): "
        if isinstance(detail, dict) and "message" in detail:
            detail = {**detail, "message": prefix + str(detail["message"]), "step": k}
        elif isinstance(detail, str):
            detail = prefix + detail
        raise type(exc)(detail, code=exc.code, status_code=exc.status_code) from exc


def check_receives(k: int, receives: list[Any]) -> list[dict[str, Any]]:
    """What step k receives: outputs of earlier steps only, named as plain file names, each once."""
    out: list[dict[str, Any]] = []
    for item in receives:
        if item.step >= k:
            which = "itself" if item.step == k else f"step {item.step}, which runs after it"
            raise Invalid(
                f"it names the output {item.name!r} of {which}; a step can only receive outputs of the "
                "steps before it",
                code="receives_later_step",
            )
        if not _OUTPUT_NAME.match(item.name) or item.name in ("conclusion.json", "actions.json"):
            raise Invalid(
                f"{item.name!r} is not an output a step can hand on: a plain file name from /work/output "
                "(conclusion.json is handed on to every later step anyway; actions.json never is)"
            )
        entry = {"step": item.step, "name": item.name}
        if entry not in out:
            out.append(entry)
    return out


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
    """Check every step, then stage each step's bundle on its own; nothing is kept if any step is refused."""
    await gates.require_code_execution(ctx.company_id)
    if not body.steps:
        raise Invalid("a flow needs at least one step", code="no_steps")
    if len(body.steps) > MAX_STEPS:
        raise Invalid(
            f"a flow has at most {MAX_STEPS} steps; this one has {len(body.steps)}", code="too_many_steps"
        )
    checked = []
    for k, step in enumerate(body.steps, start=1):
        with for_step(k, step.title):
            await asyncio.to_thread(runs.check_code, step.code)
            limits = runs.check_limits(step.limits.model_dump(exclude_none=True) if step.limits else None)
            staging.check_datasets(ctx, step.datasets)
            receives = check_receives(k, step.receives)
        checked.append((k, step, limits, receives))
    await credits.require_minimum(ctx.company_id)
    await runs.check_bounds(ctx, runs=len(checked))  # each step is a run: a flow counts them all
    company = await Company.select(Company.flow_action_cap).where(Company.id == ctx.company_id).first()
    bundles: list[staging.StagedBundle] = []
    try:
        for k, step, _limits, _receives in checked:
            with for_step(k, step.title):
                staged = sum(bundle_bytes(b.manifest) for b in bundles)  # not saved yet: not counted
                bundles.append(
                    await runs.stage_bundle(ctx, step.datasets, step.files, allow_empty=k > 1, staged=staged)
                )
    except BaseException:
        for bundle in bundles:
            await asyncio.to_thread(staging.remove_bundle, bundle.directory)
        raise
    steps = [
        PlannedStep(
            k=k,
            title=step.title,
            code=step.code,
            datasets=list(dict.fromkeys(d.strip() for d in step.datasets if d.strip())),
            file_ids=list(dict.fromkeys(step.files)),
            limits=limits,
            receives=receives,
            read_actions=step.capability == Capability.propose_writes,
        )
        for (k, step, limits, receives) in checked
    ]
    flow_id = await save_flow(
        company_id=ctx.company_id,
        requested_by=ctx.user_id,
        conversation_id=body.conversation_id,
        title=body.title,
        plan=body.plan,
        steps=steps,
        bundles=bundles,
        action_cap=company["flow_action_cap"] if company else 20,
        actor=actor or ctx.actor,
    )
    return await flow_detail(ctx, flow_id)


@dataclass
class PlannedStep:
    """A step checked and ready to be saved over its staged bundle."""

    k: int
    title: str
    code: str
    datasets: list[str]
    file_ids: list[int]
    limits: dict[str, int]
    receives: list[dict[str, Any]]
    read_actions: bool


async def save_flow(
    *,
    company_id: int,
    requested_by: int,
    conversation_id: str,
    title: str,
    plan: str,
    steps: list[PlannedStep],
    bundles: list[staging.StagedBundle],
    action_cap: int,
    actor: str,
    schedule_id: int | None = None,
) -> int:
    """The one place a flow and its step runs are made: a proposal (waiting for a person), or a schedule's
    firing (approved by the schedule, every step `read`, step 1 queued at once). The flow and all its steps
    are written in one transaction: a firing's step 1 cannot end before its later steps exist (the flow
    would count as done with them left waiting), and a failure keeps nothing, its bundles included."""
    now = clock.now()
    code_found = [await asyncio.to_thread(runs.code_findings, step.code) for step in steps]
    try:
        async with Flow._meta.db.transaction():
            flow = Flow(
                company=company_id,
                requested_by=requested_by,
                conversation_id=conversation_id,
                title=title,
                plan=plan,
                status=FlowStatus.awaiting_approval if schedule_id is None else FlowStatus.running,
                step_count=len(steps),
                flow_sha256="",
                action_cap=action_cap,
                created_at=now,
                updated_at=now,
                schedule_id=schedule_id,
                approved_by=None if schedule_id is None else f"schedule:{schedule_id}",
                approved_at=None if schedule_id is None else now,
            )
            await flow.save()
            rows = []
            for step, bundle, found in zip(steps, bundles, code_found, strict=True):
                run = await create_run(
                    company_id=company_id,
                    requested_by=requested_by,
                    conversation_id=conversation_id,
                    title=step.title,
                    plan=plan,
                    code=step.code,
                    datasets=step.datasets,
                    file_ids=step.file_ids,
                    limits=step.limits,
                    bundle=bundle,
                    findings=[f.model_dump() for f in bundle.findings] + found,
                    now=now,
                    schedule_id=schedule_id,
                    flow_id=flow.id,
                    flow_step=step.k,
                    read_actions=step.read_actions and schedule_id is None,
                    receives=step.receives,
                )
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
    except BaseException:
        for bundle in bundles:
            await asyncio.to_thread(staging.remove_bundle, bundle.directory)
        raise
    if schedule_id is not None:
        queued.announce()  # step 1 is queued now that it is committed
    await audit.record(
        "flow.proposed" if schedule_id is None else "flow.scheduled_firing",
        actor=actor,
        company_id=company_id,
        subject_type="flow",
        subject_id=flow.id,
        data={
            "title": title,
            "conversation_id": conversation_id,
            "flow_sha256": digest,
            "schedule_id": schedule_id,
            "steps": [
                {
                    "step": r["flow_step"],
                    "run_id": r["id"],
                    "code_sha256": r["code_sha256"],
                    "bundle_sha256": r["bundle_sha256"],
                    "capability": capability_of(r),
                    "receives": r["receives"],
                }
                for r in rows
            ],
        },
    )
    return flow.id


async def get_flow_row(ctx: UserContext, flow_id: int) -> dict[str, Any]:
    """A flow the caller may see, by the rule for runs: the requester's own, or any of the company's for an
    admin or an auditor. Else 404."""
    row = await Flow.select().where((Flow.id == flow_id) & (Flow.company == ctx.company_id)).first()
    if row is None or not (ctx.sees_company_history or row["requested_by"] == ctx.user_id):
        raise NotFound(f"no flow {flow_id}")
    return row


async def step_rows(flow_id: int) -> list[dict[str, Any]]:
    """The flow's steps in order: for each step its latest run."""
    rows = await (
        Run.select()
        .where(Run.flow_id == flow_id)
        .order_by(Run.flow_step)
        .order_by(Run.id)
        .output(load_json=True)
    )
    latest: dict[int, dict[str, Any]] = {}
    for row in rows:
        latest[row["flow_step"]] = row
    return [latest[k] for k in sorted(latest)]


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
    now = clock.now()
    # the flow and every step change together: a flow `running` with a step still awaiting approval
    # would never move on
    async with audit.atomic():  # every step's maximum cost held at once, or 402 and nothing changes
        costs = await holds.reserve(ctx.company_id, steps, what=f"this flow ({len(steps)} steps)")
        await _claim(
            flow_id,
            {
                Flow.status: FlowStatus.running,
                Flow.approved_by: ctx.email,
                Flow.approved_at: now,
                Flow.updated_at: now,
            },
        )
        for step, cost in zip(steps, costs, strict=True):
            await Run.update(
                {
                    Run.status: RunStatus.queued if step["flow_step"] == 1 else RunStatus.waiting,
                    Run.credits_reserved: cost,
                    Run.approval_kind: ApprovalKind.person,
                    Run.approved_by: ctx.email,
                    Run.approved_at: now,
                    Run.approved_code_sha256: sha256_text(step["code"]),
                    Run.approved_bundle_sha256: step["bundle_sha256"],
                    Run.updated_at: now,
                }
            ).where((Run.id == step["id"]) & (Run.status == RunStatus.awaiting_approval))
        await audit.record(
            "flow.approved",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="flow",
            subject_id=flow_id,
            data={
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
        )
    queued.announce()
    return await flow_detail(ctx, flow_id)


async def reject(ctx: UserContext, flow_id: int, reason: str | None) -> FlowDetail:
    await _to_decide(ctx, flow_id, "reject")
    now = clock.now()
    text = (reason or "").strip()[:2000] or None
    # claimed like an approval: of two people deciding at once, one wins and the other is told so (a
    # rejection that lost must not take the bundles of a flow already running)
    steps = await step_rows(flow_id)
    async with audit.atomic():
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
        for step in steps:
            await Run.update(
                {
                    Run.status: RunStatus.rejected,
                    Run.rejected_by: ctx.email,
                    Run.rejected_at: now,
                    Run.rejection_reason: text,
                    Run.updated_at: now,
                }
            ).where((Run.id == step["id"]) & (Run.status == RunStatus.awaiting_approval))
        await audit.record(
            "flow.rejected",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="flow",
            subject_id=flow_id,
            data={"reason": reason or "", **ctx.via()},
        )
    for step in steps:
        await asyncio.to_thread(staging.remove_bundle, step["bundle_dir"])
    return await flow_detail(ctx, flow_id)


async def _requester(user_id: int) -> PersonRef:
    person = await User.select(User.id, User.email, User.name).where(User.id == user_id).first()
    return PersonRef(**person)


async def flow_detail(ctx: UserContext, flow_id: int) -> FlowDetail:
    row = await get_flow_row(ctx, flow_id)
    steps = await step_rows(flow_id)
    blocked = None
    if row["status"] == FlowStatus.awaiting_approval:
        blocked = await credits.blocked_reason(ctx.company_id)
        if not (await gates.company(ctx.company_id))["code_execution_enabled"]:
            blocked = "code execution is turned off for this company"
    out_steps = []
    for step in steps:
        # stored when it was handed its carry; before that, what it will inherit, as the approver sees it
        sources = (
            await run_sources(step)
            if step["source_datasets"] is not None
            else await progress.step_sources(step)
        )
        unreadable = unreadable_sources(ctx, sources)  # the rule Drive applies to its outputs
        withheld = withheld_reason(unreadable) if unreadable else auditor_withholds(ctx, row)
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
                run=await detail(ctx, step["id"]),
            )
        )
    return FlowDetail(
        id=row["id"],
        title=row["title"],
        plan=row["plan"],
        conversation_id=row["conversation_id"],
        status=row["status"],
        requested_by=await _requester(row["requested_by"]),
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
