"""An admin's "expected here" for an injection finding (issue 55): a legitimate cell that reads like an
instruction ("Please call the customer before shipping") need not warn as new on every run.

An acknowledgement belongs to the admin's company and is keyed by the sha256 of the text the finding judged
(`Finding.cell_sha256`: the cell, the line, or the cells read together) and its column ("" for a line of
text): it holds for every finding of the company with that hash in that column, and lapses by itself when the
cell changes (another hash). It never hides a finding: the run's detail shows it with `acknowledged` filled
in (backend/staging/acknowledged.py `attach`). Made from a finding of a run the admin can see (so no one acknowledges a hash they were not
shown), withdrawn by its id; both are audited under the run / the acknowledgement.
"""

from __future__ import annotations

from typing import Any

from backend import clock
from backend.audit import service as audit
from backend.errors import Conflict, Forbidden, Invalid, NotFound
from backend.runs.read import get_run_row
from backend.staging.tables import InjectionAcknowledgement as Ack
from backend.tenancy.context import UserContext

MAX_REASON = 500


def _require_admin(ctx: UserContext, what: str) -> None:
    ctx.require_person(what)  # a session or the operator: never the assistant's token, never an auditor
    if not ctx.is_admin:
        raise Forbidden(f"only a company admin can {what}", code="forbidden")


def _info(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "cell_sha256": row["cell_sha256"],
        "column": row["column_name"] or None,
        "reason": row["reason"],
        "by": row["acknowledged_by"],
        "at": row["acknowledged_at"],
    }


async def acknowledge(ctx: UserContext, run_id: int, index: int, reason: str) -> dict[str, Any]:
    """Mark finding `index` of run `run_id` (its `findings` as the detail lists them) expected here."""
    _require_admin(ctx, "acknowledge a warning")
    row = await get_run_row(ctx, run_id)  # 404 for another company's run
    findings = row["findings"] or []
    if not 0 <= index < len(findings):
        raise NotFound(f"run {run_id} has no finding {index}")
    finding = findings[index]
    reason = (reason or "").strip()
    if not reason:
        raise Invalid("say why this is expected here: the reason is shown beside the warning and audited")
    if len(reason) > MAX_REASON:
        raise Invalid(f"the reason is longer than {MAX_REASON} characters")
    cell = finding.get("cell_sha256")
    if not cell:
        raise Invalid("this finding was made before acknowledgements existed: stage the data again")
    column = finding.get("column") or ""
    key = (Ack.company == ctx.company_id) & (Ack.cell_sha256 == cell) & (Ack.column_name == column)
    existing = await Ack.select(Ack.id).where(key).first()
    if existing is not None:
        raise Conflict(
            {"message": "this cell is acknowledged already in this column", "id": existing["id"]},
            code="already_acknowledged",
        )
    made = (
        await Ack.insert(
            Ack(
                company=ctx.company_id,
                cell_sha256=cell,
                column_name=column,
                reason=reason,
                acknowledged_by=ctx.email,
                acknowledged_at=clock.now(),
            )
        ).returning(*Ack.all_columns())
    )[0]
    await audit.record(
        "finding.acknowledged",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=run_id,
        data={
            "acknowledgement_id": made["id"],
            "finding": index,
            "path": finding.get("path"),
            "sheet": finding.get("sheet"),
            "row": finding.get("row"),
            "column": finding.get("column"),
            "category": finding.get("category"),
            "tier": finding.get("tier", 1),
            "reason": reason,
            "via": ctx.via(),
        },
    )
    return _info(made)


async def withdraw(ctx: UserContext, ack_id: int) -> None:
    """Withdraw an acknowledgement of the admin's company (another company's: 404)."""
    _require_admin(ctx, "withdraw an acknowledgement")
    row = await Ack.select().where((Ack.id == ack_id) & (Ack.company == ctx.company_id)).first()
    if row is None:
        raise NotFound(f"no acknowledgement {ack_id}")
    await Ack.delete().where((Ack.id == ack_id) & (Ack.company == ctx.company_id))
    await audit.record(
        "finding.acknowledgement_withdrawn",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="injection_acknowledgement",
        subject_id=ack_id,
        data={"column": row["column_name"] or None, "reason": row["reason"], "via": ctx.via()},
    )


async def list_acknowledgements(ctx: UserContext) -> list[dict[str, Any]]:
    _require_admin(ctx, "list acknowledgements")
    rows = await Ack.select().where(Ack.company == ctx.company_id).order_by(Ack.id)
    return [_info(r) for r in rows]
