"""What runs tell people (backend/notify): a run waits for its approvers, a run of yours ended. Called once
the change is committed; `notify.emit` never raises, so a message that cannot be queued or sent never
undoes or fails the run's own step."""

from __future__ import annotations

from typing import Any

from backend.notify import service as notify
from backend.runs.tables import FINISHED, Run, RunStatus


async def awaiting_approval(row: dict[str, Any], company: dict[str, Any] | None = None) -> None:
    """A run (not a flow's step: its flow is approved whole) waits: its requester and the company's admins,
    who may approve it (runs/read.py `can_decide`), are told. `company`: its row as the request read it (with
    no SMTP and no webhook endpoint, nothing is read or written)."""
    if row.get("status") != RunStatus.awaiting_approval or row.get("flow_id") is not None:
        return
    company_id, requester = row["company"], row["requested_by"]
    notice = notify.Notice(
        event="run.awaiting_approval",
        company_id=company_id,
        subject_type="run",
        subject_id=row["id"],
        path=f"/runs/{row['id']}",
        status=RunStatus.awaiting_approval,
    )
    await notify.emit(notice, lambda: notify.approvers(company_id, requester), company=company)


async def flow_awaiting_approval(
    flow_id: int, company_id: int, requester: int, company: dict[str, Any] | None = None
) -> None:
    """A flow waits: whoever may approve it (as a run: its requester and the company's admins) is told."""
    notice = notify.Notice(
        event="flow.awaiting_approval",
        company_id=company_id,
        subject_type="flow",
        subject_id=flow_id,
        path=f"/flows/{flow_id}",
        status=RunStatus.awaiting_approval,
    )
    await notify.emit(notice, lambda: notify.approvers(company_id, requester), company=company)


async def ended(
    run_id: int, status: str, known: tuple[dict[str, Any], dict[str, Any] | None] | None = None
) -> None:
    """A run ended after its approval: its requester is told whether it finished or failed (a flow's steps
    are told with their flow's page, not one by one). `known`: its row and its company's as the caller read
    them; else one query reads both."""
    if status not in FINISHED or status == RunStatus.skipped:
        return
    if known is not None:
        row, company = known
    else:
        found = (
            await Run.select(
                Run.company, Run.requested_by, Run.flow_id, Run.company.name, Run.company.webhook_endpoints
            )
            .where(Run.id == run_id)
            .first()
        )
        if found is None:
            return
        row = found
        company = {"name": found["company.name"], "webhook_endpoints": found["company.webhook_endpoints"]}
    if row["flow_id"] is not None:
        return
    notice = notify.Notice(
        event="run.finished" if status == RunStatus.succeeded else "run.failed",
        company_id=row["company"],
        subject_type="run",
        subject_id=run_id,
        path=f"/runs/{run_id}",
        status=str(status),
    )
    await notify.emit(notice, [row["requested_by"]], company=company)
