"""The gates, in order: the assistant's write ability (else the feature is absent) → the company switch
→ credits. Checked when a run is proposed or approved, again right before its VM starts (the embedded
worker's start, a fleet host's claim) and before a flow's next step is queued; turning a gate off cancels
what is already queued and a flow's steps still waiting."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import Forbidden, NotFound
from backend.runs import ended
from backend.runs.tables import Run, RunStatus
from backend.staging.bundle import remove_bundle
from backend.tenancy import service as tenancy_service
from backend.tenancy.auth import authenticate
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Company

CODE_EXECUTION_OFF = "code execution was turned off for this company"
ASSISTANT_WRITE_OFF = "the assistant's ability to write was turned off for this company"


async def company(company_id: int, ctx: UserContext | None = None) -> dict[str, Any]:
    """The company's row: the one the caller's context read with the caller at the start of this request
    (`ctx`, when it is of that company: the switches and the pool as they were a moment ago, never kept
    past the request), else read now."""
    if ctx is not None and ctx.company is not None and ctx.company_id == company_id:
        return ctx.company
    row = await Company.select().where(Company.id == company_id).first()
    assert row is not None
    return row


async def require_feature(company_id: int) -> dict[str, Any]:
    """With the assistant's ability to write turned off, code runs do not exist for this company."""
    return feature(await company(company_id))


def feature(row: dict[str, Any]) -> dict[str, Any]:
    if not row["assistant_write_enabled"]:
        raise NotFound("not found", code="not_found")
    return row


async def feature_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The guard on every controller of runs, action items, schedules and credits: 404 while the feature
    is absent. Creating or approving a run checks the company switch as well (require_code_execution)."""
    ctx = await authenticate(connection)
    feature(await company(ctx.company_id, ctx))


async def require_code_execution(company_id: int, ctx: UserContext | None = None) -> dict[str, Any]:
    """`check_code_execution` of the company's row (`company`: the one read with `ctx` this request)."""
    return check_code_execution(await company(company_id, ctx))


def check_code_execution(row: dict[str, Any]) -> dict[str, Any]:
    """The company's row when runs may be proposed and approved: 404 while the feature is absent, 403 while
    code execution is off."""
    if not feature(row)["code_execution_enabled"]:
        raise Forbidden(
            "code execution is turned off for this company (it ships off); a company admin can turn it on in Settings",
            code="code_execution_disabled",
        )
    return row


APPROVE_BLOCKED_OFF = "code execution is turned off for this company"


async def approve_blocked(row: dict[str, Any], figures: credits.Balance | None = None) -> str | None:
    """Why a person cannot approve a waiting run or flow of this company now (said beside its Approve
    button), or None: the one wording of it, for runs and flows alike. `figures`: the company's
    `credits.balance` when the caller read it already."""
    if not row["code_execution_enabled"]:
        return APPROVE_BLOCKED_OFF
    return await credits.blocked_reason(row["id"], figures=figures)


async def gate_problem(company_id: int) -> str | None:
    """Why no VM may start for this company now, or None: the gates a run passed at approval, again. Its
    credits were reserved at approval, so what approved runs hold does not count here; a pool used up by
    what was charged (or lowered since) still stops it."""
    row = await company(company_id)
    if not row["assistant_write_enabled"]:
        return ASSISTANT_WRITE_OFF
    if not row["code_execution_enabled"]:
        return CODE_EXECUTION_OFF
    return await credits.blocked_reason(company_id, holds=False)


async def cancel_queued(company_id: int, reason: str, *, actor: str) -> list[int]:
    """End every run of the company that has not started: queued runs, and a flow's steps `waiting` for the
    step before them (in a fleet that step may be running on a host; its successors never start). Queued
    runs first, so a flow whose first step is cancelled skips the rest as before; a waiting step cancelled
    here stops its flow (the steps after it are skipped). Audited per run; its staged bundle is deleted
    (the manifest and its hashes stay in the row and the audit trail)."""
    rows = await Run.select(Run.id, Run.company, Run.status, Run.flow_step, Run.bundle_dir).where(
        (Run.company == company_id) & Run.status.is_in([RunStatus.queued, RunStatus.waiting])
    )
    rows.sort(key=lambda r: (r["status"] != RunStatus.queued, r["flow_step"] or 0, r["id"]))
    cancelled = []
    for row in rows:
        if await cancel_unstarted(row, reason, actor=actor):
            cancelled.append(row["id"])
    return cancelled


async def cancel_unstarted(
    row: dict[str, Any], reason: str, *, actor: str, only_if: Any = None, announce: bool = True
) -> bool:
    """End one run that has not started (`row`: its id, company, status and bundle_dir) as `cancelled`
    because of `reason` (a gate: `gate_problem`'s words), if it is still in that status (and matches
    `only_if`): its entry `run.cancelled` in the same transaction, its bundle deleted, its end announced
    (`announce`: the flow it is a step of moves on). False when it was no longer there to cancel."""
    now = datetime.now(UTC)
    # the status condition makes this safe against a worker picking the run up at the same moment
    where = (Run.id == row["id"]) & (Run.status == row["status"])
    if only_if is not None:
        where = where & only_if
    async with audit.atomic():  # the end and its entry: both or neither
        done = (
            await Run.update(
                {
                    Run.status: RunStatus.cancelled,
                    Run.finished_at: now,
                    Run.updated_at: now,
                    Run.error_message: f"cancelled before it started: {reason}",
                }
            )
            .where(where)
            .returning(Run.id)
        )
        if done:
            await audit.record(
                "run.cancelled",
                actor=actor,
                company_id=row["company"],
                subject_type="run",
                subject_id=row["id"],
                data={"reason": reason},
            )
    if not done:
        return False
    await asyncio.to_thread(remove_bundle, row["bundle_dir"])
    if announce:
        await ended.announce(row["id"], RunStatus.cancelled)
    return True


def wire() -> None:
    """A gate turned off cancels the runs already waiting: hooks `_cancel_when_closed` into tenancy's
    settings change. Called at start-up by the API (`create_app`), where settings change; again: no change."""
    tenancy_service.on_gate_closed(_cancel_when_closed)


async def _cancel_when_closed(company_id: int, setting: str, actor: str) -> None:
    reason = ASSISTANT_WRITE_OFF if setting == "assistant_write_enabled" else CODE_EXECUTION_OFF
    await cancel_queued(company_id, reason, actor=actor)
