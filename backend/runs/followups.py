"""Follow-up grants: a person's approval of a run may let later runs of the same conversation skip approval,
inside a scope, a time and a count fixed at that approval (per the company setting at that moment)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from backend import clock
from backend.runs.tables import ApprovalKind, Run
from backend.tenancy.context import UserContext


def _covers(
    approved: dict[str, Any], datasets: list[str], file_ids: list[int], limits: dict[str, int]
) -> bool:
    return (
        set(datasets) <= set(approved["datasets"])
        and set(file_ids) <= set(approved["file_ids"])
        and all(limits[k] <= approved["limits"].get(k, 0) for k in limits)
    )


def grant_fields(company: dict[str, Any], now: datetime | None = None) -> dict[Any, Any]:
    """The follow-up grant a person's approval gives, per the company setting at that moment: none when
    the setting is off; else an expiry (now + followup_grant_hours) and a cap (followup_grant_max_runs)."""
    if not company["followup_without_reapproval"]:
        return {Run.followup_grant_expires_at: None, Run.followup_grant_max_runs: 0}
    now = now or clock.now()
    return {
        Run.followup_grant_expires_at: now + timedelta(hours=company["followup_grant_hours"]),
        Run.followup_grant_max_runs: company["followup_grant_max_runs"],
    }


def followup_grant(row: dict[str, Any], company: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The grant a run's approval gave, as the run detail shows it (None when it gave none)."""
    if row["followup_grant_expires_at"] is None or not row["followup_grant_max_runs"]:
        return None
    expires = row["followup_grant_expires_at"]
    used = row["followup_grant_used"] or 0
    active = expires > clock.now() and used < row["followup_grant_max_runs"]
    if company is not None:
        active = active and bool(company["followup_without_reapproval"])
    return {
        "expires_at": expires,
        "max_runs": row["followup_grant_max_runs"],
        "used": used,
        "active": active,
        "conversation_id": row["conversation_id"],
        "datasets": row["datasets"],
        "file_ids": row["file_ids"],
        "limits": row["limits"],
    }


async def refusal(ctx: UserContext, company: dict[str, Any], followup_of: int, asked: Run) -> str | None:
    """Why run `followup_of` cannot let the follow-up `asked` skip approval (None when its grant covers it)."""
    conversation_id = asked.conversation_id
    # JSON columns: Piccolo types a row's as their text; a proposal's row, made in this process, holds the values
    datasets, file_ids = cast(list[str], asked.datasets), cast(list[int], asked.file_ids)
    if not company["followup_without_reapproval"]:
        return "follow-ups without re-approval are turned off for this company"
    parent = (
        await Run.select()
        .where((Run.id == followup_of) & (Run.company == ctx.company_id) & (Run.requested_by == ctx.user_id))
        .output(load_json=True)
        .first()
    )
    if parent is None:  # another company's or another user's run: say nothing about it
        return f"run {followup_of} is not one of your runs"
    if parent["conversation_id"] != conversation_id:
        return f"run {followup_of} belongs to another conversation"
    if (
        parent["approved_at"] is None
        or parent["narrowed_from"] is not None
        or parent["schedule_id"] is not None
        or parent["approval_kind"] != ApprovalKind.person
    ):
        return f"run {followup_of} was not approved by a person, so it grants no follow-ups"
    if parent["followup_grant_expires_at"] is None or not parent["followup_grant_max_runs"]:
        return f"the approval of run {followup_of} granted no follow-ups (the setting was off then)"
    if parent["followup_grant_expires_at"] <= clock.now():
        return f"the follow-up grant of run {followup_of} expired at {parent['followup_grant_expires_at'].isoformat()}"
    if (parent["followup_grant_used"] or 0) >= parent["followup_grant_max_runs"]:
        return (
            f"the follow-up grant of run {followup_of} has been used "
            f"{parent['followup_grant_max_runs']} time(s), its limit"
        )
    wider = sorted(set(datasets) - set(parent["datasets"]))
    if wider:
        return f"this follow-up reads datasets the approval of run {followup_of} did not cover: {wider}"
    extra_files = sorted(set(file_ids) - set(parent["file_ids"]))
    if extra_files:
        return f"this follow-up reads files the approval of run {followup_of} did not cover: {extra_files}"
    if not _covers(parent, datasets, file_ids, cast(dict[str, int], asked.limits)):
        return f"this follow-up asks for higher limits than run {followup_of} was approved with"
    return None


async def claim(parent_id: int) -> bool:
    """Take one follow-up slot of the grant, atomically: one conditional update of the parent's counter,
    so two parallel proposals cannot both take the last slot (row lock on PostgreSQL, one writer on SQLite)."""
    claimed = (
        await Run.update({Run.followup_grant_used: Run.followup_grant_used + 1})
        .where(
            (Run.id == parent_id)
            & (Run.followup_grant_used < Run.followup_grant_max_runs)
            & (Run.followup_grant_expires_at > clock.now())
        )
        .returning(Run.id)
    )
    return bool(claimed)


async def admit(ctx: UserContext, company: dict[str, Any], followup_of: int, asked: Run) -> str | None:
    """None when the grant of run `followup_of` covers the follow-up `asked` and one of its slots was taken
    for it; else why the follow-up waits for approval like any other run."""
    note = await refusal(ctx, company, followup_of, asked)
    if note is None and not await claim(followup_of):
        note = f"the follow-up grant of run {followup_of} expired or has no runs left"
    return note
