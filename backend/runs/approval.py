"""Deciding what was proposed: the twin of proposal.py. A run is approved here and nowhere else, whoever
approves it, and rejected here too:

- a person's approval of a run (`runs/service.approve`): `approve_run`, kind `person`, which also gives the
  follow-up grant the company's setting allows;
- a follow-up let through by such a grant (`runs/service._followup`): `approve_run`, kind `followup`;
- a person's approval of a flow, every step at once (`flows/service.approve`): `approve_steps`;
- a schedule's firing, whose runs are born approved by the schedule (`runs/factory.create_run`): `fired`;
- a rejection of a run or a flow: `reject_run`, `reject_steps`.

Every approval passes `check` before anything is written (a check added there gates all four) and writes
the same columns (`approved_values`: the kind, who, when, the code and bundle hashes the approval binds, the
credits reserved). The decision itself is a conditional write (backend/decisions.py): of two decisions at
once exactly one lands, and the other changes nothing and is not audited. A flow's own row is the flows
package's to claim (`claim`, as proposal.py's `Maker` makes the flow): this module imports no flow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend import clock, decisions
from backend.audit import service as audit
from backend.errors import Conflict
from backend.hashing import sha256_text
from backend.runs import followups, gates, holds, queued
from backend.runs.rows import whole_run
from backend.runs.tables import ApprovalKind, Run, RunStatus
from backend.tenancy.context import UserContext


class NotApprovable(Conflict):
    """`check` refused an approval: nothing is written (a follow-up then waits for a person, a schedule's
    firing pauses the schedule, a person is told 409)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail, code="not_approvable")


@dataclass(frozen=True)
class Approval:
    """Who approves which runs: `by` is a person's email, `followup:<run id>` or `schedule:<id>`; `runs` the
    rows as they are approved (their `code`, `bundle_sha256` and `limits`)."""

    kind: ApprovalKind
    by: str
    company_id: int
    runs: Sequence[Mapping[str, Any]]


def check(approval: Approval) -> None:
    """Every approval passes here before anything is written, or `NotApprovable`: an approval binds the
    code and the staged data, so a run with nothing staged to bind has nothing to approve."""
    for run in approval.runs:
        if not run.get("bundle_sha256") or run.get("code") is None:
            raise NotApprovable(f"run {run.get('id') or '(new)'} has no staged bundle or code to approve")


def approved_values(
    run: Mapping[str, Any],
    *,
    kind: ApprovalKind,
    by: str,
    now: datetime,
    reserved: float,
    status: RunStatus = RunStatus.queued,
) -> dict[Any, Any]:
    """The columns every approval writes on a run: what it binds (the code's hash as it is now, the bundle's)
    and who, when, how, with the maximum cost held for it."""
    return {
        Run.status: status,
        Run.credits_reserved: reserved,
        Run.approval_kind: kind,
        Run.approved_by: by,
        Run.approved_at: now,
        Run.approved_code_sha256: sha256_text(run["code"]),
        Run.approved_bundle_sha256: run["bundle_sha256"],
        Run.updated_at: now,
    }


def step_status(run: Mapping[str, Any]) -> RunStatus:
    """A flow's first step is queued at its approval; a later one waits for the steps before it."""
    return RunStatus.queued if (run.get("flow_step") or 1) == 1 else RunStatus.waiting


async def _claim(run_id: int, values: dict[Any, Any]) -> None:
    """Decide a waiting run (inside `audit.atomic()` with its entry): a lost decision changes nothing."""
    await decisions.claim(
        Run,
        run_id,
        values,
        status=Run.status,
        waiting=RunStatus.awaiting_approval,
        lost=f"run {run_id} was decided by someone else meanwhile; nothing was changed",
    )


async def approve_run(
    run_id: int,
    *,
    kind: ApprovalKind,
    by: str,
    company_id: int,
    narrowed_from: int | None = None,
    actor: str,
    via: dict[str, Any] | None = None,
    row: dict[str, Any] | None = None,
    company: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Approve one waiting run, a person's (kind `person`) or a follow-up's (`followup`, `narrowed_from` the
    run whose grant let it through). `row`, `company`: as the caller read them this request. Returns what
    changed on its row."""
    if row is None:
        row = await whole_run(run_id)
    assert row is not None
    check(Approval(kind=kind, by=by, company_id=company_id, runs=[row]))
    now = clock.now()
    # only a person's approval grants follow-ups (per the company setting at this moment)
    person = kind == ApprovalKind.person
    if person and company is None:
        company = await gates.company(company_id)
    grant = followups.grant_fields(company, now) if person and company is not None else {}
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
        (data["credits_reserved"],) = await holds.reserve(company_id, [row], company=company)
        values = {
            **approved_values(row, kind=kind, by=by, now=now, reserved=data["credits_reserved"]),
            Run.narrowed_from: narrowed_from,
            **grant,
        }
        await _claim(run_id, values)
        await audit.record(
            action, actor=actor, company_id=company_id, subject_type="run", subject_id=run_id, data=data
        )
    queued.announce()
    return {column._meta.name: value for column, value in values.items()}


async def approve_steps(
    ctx: UserContext,
    steps: list[dict[str, Any]],
    *,
    claim: Callable[[datetime], Awaitable[None]],
    entry: Callable[[list[float]], dict[str, Any]],
) -> None:
    """A person approves every step of a flow at once: each step's maximum cost held together, the flow's
    own row claimed (`claim(now)`, the flows package's conditional write) and every step approved in the
    same transaction, with `entry(costs)` (the arguments of `audit.record`). A flow `running` with a step
    still awaiting approval would never move on."""
    check(Approval(kind=ApprovalKind.person, by=ctx.email, company_id=ctx.company_id, runs=steps))
    now = clock.now()
    async with audit.atomic():  # every step's maximum cost held at once, or 402 and nothing changes
        costs = await holds.reserve(ctx.company_id, steps, what=f"this flow ({len(steps)} steps)")
        await claim(now)
        for step, cost in zip(steps, costs, strict=True):
            values = approved_values(
                step, kind=ApprovalKind.person, by=ctx.email, now=now, reserved=cost, status=step_status(step)
            )
            await Run.update(values).where(
                (Run.id == step["id"]) & (Run.status == RunStatus.awaiting_approval)
            )
        await audit.record(**entry(costs))
    queued.announce()


def fired_by(schedule_id: int) -> str:
    """Who approved a schedule's firing: the schedule (its owner approved the code when making it)."""
    return f"schedule:{schedule_id}"


def fired(run: Run, *, company_id: int, schedule_id: int, reserved: float, now: datetime) -> None:
    """A schedule's firing: the new run (a `Run` not yet saved) is born approved by its schedule, bound to
    the frozen code and the bundle staged now; its maximum cost was reserved by the firing in this
    transaction (runs/proposal.py `_make`). A flow's later step waits for the steps before it."""
    row = {"id": run.id, "code": run.code, "bundle_sha256": run.bundle_sha256, "flow_step": run.flow_step}
    by = fired_by(schedule_id)
    check(Approval(kind=ApprovalKind.schedule, by=by, company_id=company_id, runs=[row]))
    values = approved_values(
        row, kind=ApprovalKind.schedule, by=by, now=now, reserved=reserved, status=step_status(row)
    )
    for column, value in values.items():
        setattr(run, column._meta.name, value)


async def reject_run(ctx: UserContext, run_id: int, reason: str | None) -> None:
    """A person rejects one waiting run (the caller removes its bundle once this returned: a rejection that
    lost to an approval keeps the bundle the run needs)."""
    now = clock.now()
    async with audit.atomic():
        await _claim(run_id, rejected_values(ctx, reason, now))
        await _rejected(ctx, "run", run_id, reason)


def rejected_values(ctx: UserContext, reason: str | None, now: datetime) -> dict[Any, Any]:
    return {
        Run.status: RunStatus.rejected,
        Run.rejected_by: ctx.email,
        Run.rejected_at: now,
        Run.rejection_reason: (reason or "").strip()[:2000] or None,
        Run.updated_at: now,
    }


async def reject_steps(
    ctx: UserContext,
    steps: list[dict[str, Any]],
    reason: str | None,
    *,
    claim: Callable[[datetime], Awaitable[None]],
    flow_id: int,
) -> None:
    """A person rejects a flow: its row claimed like an approval (`claim(now)`: of two people deciding at
    once, one wins and the other is told so), every step still waiting rejected with it."""
    now = clock.now()
    async with audit.atomic():
        await claim(now)
        for step in steps:
            await Run.update(rejected_values(ctx, reason, now)).where(
                (Run.id == step["id"]) & (Run.status == RunStatus.awaiting_approval)
            )
        await _rejected(ctx, "flow", flow_id, reason)


async def _rejected(ctx: UserContext, subject: str, subject_id: int, reason: str | None) -> None:
    """The audit entry of a rejection (`run.rejected`, `flow.rejected`), in the rejection's transaction."""
    await audit.record(
        f"{subject}.rejected",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type=subject,
        subject_id=subject_id,
        data={"reason": reason or "", **ctx.via()},
    )
