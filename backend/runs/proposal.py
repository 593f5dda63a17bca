"""One way a run is proposed, whoever proposes it: the assistant (a run, POST /api/runs), the assistant (a
flow, POST /api/flows, each step a run) or a schedule (a firing: the frozen code over freshly staged data).
Every proposal is a typed spec (`Proposal`) that goes through the same steps in the same order:

1. gate   - the company, read once, through every gate in `GATES` (its switches, its credit pool: the
            balance it reads is the one the answer shows);
2. check  - every step: its code (size and syntax; a schedule's frozen code: its hash), its limits, its
            datasets (the proposer's permissions now), what it receives, invisible characters in the code;
            then the per-user bounds on waiting and hourly proposals (not a schedule's: its own caps);
3. stage  - every step's bundle and manifest, within the staged-bytes quotas; all of them removed again
            when any step or what follows fails;
4. create - the Run row(s) by a `Maker` (runs' own `RUN` here; a flow's, with its Flow row, in
            backend/flows/service.py); a schedule's firing holds its maximum cost in the same transaction;
5. audit  - the entry that says who proposed what (the maker's; a schedule adds its firing).

A gate added to `GATES` refuses the three alike. A refusal is the AppError a caller answers with; for a
schedule it is `Refused`, the reason the schedule is paused with."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import AppError, Forbidden, Invalid
from backend.hashing import sha256_text
from backend.injection import scan_text
from backend.runs import gates, holds, queued, quotas
from backend.runs.factory import create_run
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.staging import service as staging
from backend.staging.bundle import bundle_root, remove_bundle
from backend.tenancy.context import UserContext


class Proposer(StrEnum):
    """Who proposes: the assistant a run, the assistant a flow, or a schedule its firing."""

    assistant = "assistant"
    flow = "flow"
    schedule = "schedule"


@dataclass(frozen=True)
class StepSpec:
    """One run of a proposal as asked for: a run is one step, a flow's steps are runs."""

    title: str
    code: str
    datasets: list[str]
    file_ids: list[int]
    limits: dict[str, Any] | None = (
        None  # as asked, checked against the operator caps; a schedule's as frozen
    )
    receives: list[Any] = field(default_factory=list)  # earlier steps' outputs (items with .step and .name)
    read_actions: bool = True  # its actions.json becomes items (a flow's `propose_writes`)
    frozen_sha256: str | None = None  # a schedule's frozen code: checked against this hash, not parsed again


@dataclass(frozen=True)
class Proposal:
    """What is proposed, by whom, for whom (`ctx`: the proposer's user, a schedule's owner as of now)."""

    by: Proposer
    ctx: UserContext
    conversation_id: str
    title: str
    plan: str
    steps: list[StepSpec]
    actor: str
    followup_of: int | None = None  # a run's follow-up of an approved run (runs/service.py decides it)
    schedule_id: int | None = None
    max_steps: int = 1
    now: datetime | None = None


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
    code_findings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Made:
    """What a proposal made: its runs (in step order), a flow's id, the company row its gate read and the
    credit balance its credit gate read (for the answer, in the same request; None when no gate read it)."""

    runs: list[Run]
    bundles: list[staging.StagedBundle]
    company: dict[str, Any]
    flow_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # what a maker hands to its audit
    balance: credits.Balance | None = None


class Maker(Protocol):
    """What a proposal makes (step 4) and how it is put on the record (step 5)."""

    noun: str

    async def create(
        self, p: Proposal, steps: list[PlannedStep], bundles: list[staging.StagedBundle], made: Made
    ) -> None: ...

    async def audit(self, p: Proposal, made: Made) -> None: ...


class Refused(Exception):
    """A schedule's firing refused at one of the steps: the reason it is paused with."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CodeTooLarge(AppError):
    status_code = 413
    code = "code_too_large"


class TooManyPending(AppError):
    status_code = 429
    code = "too_many_pending_runs"


# ---- 1. gate ----------------------------------------------------------------------------------------------


@dataclass
class Gated:
    """What the gates read of the company in this request: its row, and the credit balance (pool, held,
    left) the credit gate read. The proposal's answer shows that balance rather than reading it again a
    moment later; nothing here outlives the request."""

    company: dict[str, Any]
    balance: credits.Balance | None = None


Gate = Callable[[Proposal, Gated], Awaitable[None]]


async def switches(p: Proposal, gated: Gated) -> None:
    """The assistant's ability to write (else no runs exist: 404) and code execution (403)."""
    company = gated.company
    if p.by is Proposer.schedule:
        if not company["assistant_write_enabled"] or not company["code_execution_enabled"]:
            raise Forbidden("code execution is turned off for the company", code="code_execution_disabled")
        return
    gates.check_code_execution(company)


async def credit_pool(p: Proposal, gated: Gated) -> None:
    """Less than one base charge left in the pool refuses a proposal (402, saying what is left)."""
    gated.balance = await credits.require_minimum(gated.company["id"])


GATES: list[Gate] = [switches, credit_pool]


async def gate(p: Proposal) -> Gated:
    gated = Gated(company=await gates.company(p.ctx.company_id, p.ctx))
    for each in GATES:
        await each(p, gated)
    return gated


# ---- 2. check ---------------------------------------------------------------------------------------------


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


def _checked_code(code: str) -> list[dict[str, Any]]:
    """`check_code`, then the code's findings: what `check` asks of a new step's code, in one thread hop."""
    check_code(code)
    return code_findings(code)


def check_limits(asked: dict[str, Any] | None) -> dict[str, int]:
    s = get_settings()
    caps = {"wall_seconds": s.max_wall_seconds, "memory_mib": s.max_memory_mib, "vcpus": s.max_vcpus}
    out = dict(caps)
    for key, value in (asked or {}).items():
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


# an output a step hands on: a plain file name in /work/output (no folders), as the sandbox collects them
_OUTPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,199}$")


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


async def check_pending(ctx: UserContext, runs: int = 1, counts: quotas.Counts | None = None) -> None:
    """A cap on proposals awaiting a decision, per user: each holds staged company data on disk and cost a
    conversion of every file it names, so an assistant in a loop must not pile them up. A proposal adds
    `runs` (a flow, one per step). `counts`: `quotas.proposal_counts` when the caller has them already."""
    cap = get_settings().max_pending_runs_per_user
    waiting = (counts or await quotas.proposal_counts(ctx)).waiting
    if waiting + runs > cap:
        adds = f" and this flow's {runs} steps would make {waiting + runs}" if runs > 1 else ""
        raise TooManyPending(
            f"{waiting} of your runs are already waiting for approval{adds} (the limit is {cap}); "
            "approve or reject some of them before proposing more"
        )


async def check_bounds(ctx: UserContext, runs: int = 1) -> None:
    """What every proposal (and revision) passes before anything is staged: the per-user cap on runs
    waiting for a decision, and the per-user and per-company proposals per hour, counting the `runs` it
    is about to make (a flow's steps are runs)."""
    counts = await quotas.proposal_counts(ctx)  # one query for both
    await check_pending(ctx, runs, counts)
    await quotas.check_rate(ctx, runs, counts=counts)


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


def _naming(p: Proposal, k: int, title: str) -> contextlib.AbstractContextManager[None]:
    return for_step(k, title) if p.by is Proposer.flow else contextlib.nullcontext()


async def check(p: Proposal) -> list[PlannedStep]:
    if p.by is Proposer.flow:
        if not p.steps:
            raise Invalid("a flow needs at least one step", code="no_steps")
        if len(p.steps) > p.max_steps:
            raise Invalid(
                f"a flow has at most {p.max_steps} steps; this one has {len(p.steps)}", code="too_many_steps"
            )
    planned = []
    for k, step in enumerate(p.steps, start=1):
        with _naming(p, k, step.title):
            # parses up to max_code_bytes: off the loop, in one hop (each hop waits for a thread and then
            # for the loop again: under load, about 5 ms each of a proposal's tail)
            if step.frozen_sha256 is None:
                found = await asyncio.to_thread(_checked_code, step.code)
                run_limits = check_limits(step.limits)
            else:
                found = await asyncio.to_thread(code_findings, step.code)
                run_limits = dict(step.limits or {})
            await staging.check_datasets(p.ctx, step.datasets)
            if step.frozen_sha256 is not None and sha256_text(step.code) != step.frozen_sha256:
                raise Refused("the origin run's code no longer matches its hash")
            receives = check_receives(k, step.receives) if p.by is Proposer.flow else list(step.receives)
        planned.append(
            PlannedStep(
                k=k,
                title=step.title,
                code=step.code,
                datasets=list(dict.fromkeys(d.strip() for d in step.datasets if d.strip())),
                file_ids=list(dict.fromkeys(step.file_ids)),
                limits=run_limits,
                receives=receives,
                read_actions=step.read_actions,
                code_findings=found,
            )
        )
    if p.by is not Proposer.schedule:  # each step is a run: a flow counts them all
        await check_bounds(p.ctx, runs=len(planned))
    return planned


# ---- 3. stage ---------------------------------------------------------------------------------------------


async def stage_bundle(
    ctx: UserContext, datasets: list[str], file_ids: list[int], *, allow_empty: bool = False, staged: int = 0
) -> staging.StagedBundle:
    """Stage a proposal's bundle within the user's and the company's limits on staged bytes on disk: refused
    before staging when either is at its limit already (with the `staged` bytes of a flow's earlier steps,
    not saved yet), and the new bundle deleted again when it goes over."""
    held = await quotas.check_staged(ctx, staged)
    directory = bundle_root() / uuid.uuid4().hex
    bundle = await staging.stage(ctx, datasets, file_ids, directory, allow_empty=allow_empty)
    try:
        await quotas.check_staged(ctx, staged, bundle=max(1, quotas.bundle_bytes(bundle.manifest)), held=held)
    except BaseException:
        await asyncio.to_thread(remove_bundle, bundle.directory)
        raise
    return bundle


async def remove_bundles(bundles: list[staging.StagedBundle]) -> None:
    for bundle in bundles:
        await asyncio.to_thread(remove_bundle, bundle.directory)


async def stage(p: Proposal, planned: list[PlannedStep]) -> list[staging.StagedBundle]:
    """Every step's bundle, on its own (a flow's later step may stage nothing). A schedule's firing is
    bounded by the schedule caps, not the staged-bytes quotas."""
    bundles: list[staging.StagedBundle] = []
    try:
        for step, spec in zip(planned, p.steps, strict=True):
            with _naming(p, step.k, step.title):
                if p.by is Proposer.schedule:
                    directory = bundle_root() / uuid.uuid4().hex
                    bundle = await staging.stage(
                        p.ctx, spec.datasets, spec.file_ids, directory, allow_empty=step.k > 1
                    )
                else:
                    staged = sum(quotas.bundle_bytes(b.manifest) for b in bundles)  # not saved yet
                    bundle = await stage_bundle(
                        p.ctx, spec.datasets, spec.file_ids, allow_empty=step.k > 1, staged=staged
                    )
                bundles.append(bundle)
    except BaseException:
        await remove_bundles(bundles)
        raise
    return bundles


# ---- 4. create and 5. audit -------------------------------------------------------------------------------


async def create_step_run(
    p: Proposal,
    step: PlannedStep,
    bundle: staging.StagedBundle,
    *,
    title: str,
    now: datetime | None,
    **flow_columns: Any,
) -> Run:
    """A step's run as every proposal makes it, from the proposal and its staged bundle; a flow adds its own
    columns (`flow_id`, `flow_step`, `read_actions`, `receives`)."""
    return await create_run(
        company_id=p.ctx.company_id,
        requested_by=p.ctx.user_id,
        conversation_id=p.conversation_id,
        title=title,
        plan=p.plan,
        code=step.code,
        datasets=step.datasets,
        file_ids=step.file_ids,
        limits=step.limits,
        bundle=bundle,
        findings=[f.model_dump() for f in bundle.findings] + step.code_findings,
        schedule_id=p.schedule_id,
        now=now,
        **flow_columns,
    )


class RunMaker:
    """A proposal of one run: its Run row and `run.proposed` (a firing's entry is its schedule's)."""

    noun = "run"

    async def create(
        self, p: Proposal, steps: list[PlannedStep], bundles: list[staging.StagedBundle], made: Made
    ) -> None:
        (step,), (bundle,) = steps, bundles
        made.runs.append(await create_step_run(p, step, bundle, title=p.title, now=p.now))

    async def audit(self, p: Proposal, made: Made) -> None:
        if p.by is Proposer.schedule:
            return
        (run,), (bundle,) = made.runs, made.bundles
        await audit.record(
            "run.proposed",
            actor=p.actor,
            company_id=p.ctx.company_id,
            subject_type="run",
            subject_id=run.id,
            data={
                "title": p.title,
                "conversation_id": p.conversation_id,
                "code_sha256": run.code_sha256,
                "bundle_sha256": run.bundle_sha256,
                "datasets": run.datasets,
                "file_ids": run.file_ids,
                "limits": run.limits,
                "findings": len(bundle.findings),
                "followup_of": p.followup_of,
            },
        )


RUN = RunMaker()


async def _make(p: Proposal, maker: Maker, planned: list[PlannedStep], made: Made) -> None:
    if p.by is not Proposer.schedule:
        await maker.create(p, planned, made.bundles, made)
        return
    what = "this scheduled run" if maker.noun == "run" else f"this scheduled flow ({len(planned)} steps)"
    async with audit.atomic():  # its maximum cost held as it is queued, or the schedule pauses, saying why
        asker = [{"limits": s.limits, "requested_by": p.ctx.user_id} for s in planned]
        await holds.reserve(p.ctx.company_id, asker, what=what)
        await maker.create(p, planned, made.bundles, made)
        await maker.audit(p, made)
    queued.announce()  # now that it is committed


async def propose(p: Proposal, maker: Maker = RUN) -> Made:
    """Gate → check → stage → create → audit, in that order, for every proposer."""
    gated = await _refusing(p, "{}", gate(p))
    planned = await _refusing(p, "the owner no longer holds every permission this run needs: {}", check(p))
    bundles = await _refusing(p, "staging failed: {}", stage(p, planned))
    made = Made(runs=[], bundles=bundles, company=gated.company, balance=gated.balance)
    try:
        await _refusing(p, "{}", _make(p, maker, planned, made))
    except BaseException:
        await remove_bundles(bundles)
        raise
    if p.by is not Proposer.schedule:
        await maker.audit(p, made)
    return made


async def _refusing(p: Proposal, wording: str, step: Awaitable[Any]) -> Any:
    """A step's refusal, for a schedule, as the reason its firing pauses with."""
    try:
        return await step
    except AppError as exc:
        if p.by is Proposer.schedule:
            raise Refused(wording.format(exc.detail)) from exc
        raise
