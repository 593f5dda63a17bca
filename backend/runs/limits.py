"""Bounded work: how many proposals a user and a company may make in an hour, and how many staged bytes of
company data a company's unfinished runs may hold on disk. Each proposal stages a bundle (exports, every
named Drive file converted in its own child) before anyone decides about it, so proposals are not free.

Operator settings (backend/settings.py): `max_proposals_per_user_per_hour`,
`max_proposals_per_company_per_hour`, `max_staged_bytes_per_company`. A refusal is 429 with its own code.
The checks are counts, not locks: two proposals racing past the same check may overshoot a limit by the
bundles staged at that moment, never by more.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from backend.errors import AppError
from backend.runs.tables import Run, RunStatus
from backend.settings import get_settings
from backend.tenancy.context import UserContext

WINDOW = timedelta(hours=1)
IN_FLIGHT = (RunStatus.awaiting_approval, RunStatus.queued, RunStatus.waiting, RunStatus.running)


class TooManyProposals(AppError):
    status_code = 429
    code = "too_many_proposals"


class TooMuchStagedData(AppError):
    status_code = 429
    code = "too_much_staged_data"


def _now() -> datetime:
    return datetime.now(UTC)


async def check_rate(ctx: UserContext, now: datetime | None = None) -> None:
    """At most `max_proposals_per_user_per_hour` runs proposed by this user, and
    `max_proposals_per_company_per_hour` by the whole company, in the last hour. Revisions and follow-ups
    are proposals; a schedule's firings are bounded by the schedule caps instead."""
    s = get_settings()
    since = (now or _now()) - WINDOW
    recent = (Run.company == ctx.company_id) & (Run.created_at >= since) & (Run.schedule_id.is_null())
    mine = await Run.count().where(recent & (Run.requested_by == ctx.user_id))
    if mine >= s.max_proposals_per_user_per_hour:
        raise _rate_refusal("user", mine, s.max_proposals_per_user_per_hour)
    company = await Run.count().where(recent)
    if company >= s.max_proposals_per_company_per_hour:
        raise _rate_refusal("company", company, s.max_proposals_per_company_per_hour)


def _rate_refusal(scope: str, made: int, limit: int) -> TooManyProposals:
    who = "you have" if scope == "user" else "your company has"
    return TooManyProposals(
        {
            "message": f"{who} proposed {made} runs in the last hour; the limit is {limit} per "
            f"{scope} per hour. Wait before proposing more",
            "scope": scope,
            "limit": limit,
            "window_seconds": int(WINDOW.total_seconds()),
        }
    )


def bundle_bytes(manifest: dict[str, Any] | None) -> int:
    """The staged bytes a manifest lists (what its bundle holds on disk, the manifest itself aside)."""
    total = 0
    for entry in (manifest or {}).get("files") or []:
        size = entry.get("bytes") if isinstance(entry, dict) else None
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            total += size
    return total


async def staged_in_flight(company_id: int) -> int:
    """Bytes staged for the company's runs that have not ended (awaiting approval, queued, running)."""
    rows = (
        await Run.select(Run.manifest)
        .where((Run.company == company_id) & (Run.status.is_in(list(IN_FLIGHT))))
        .output(load_json=True)
    )
    return sum(bundle_bytes(r["manifest"]) for r in rows)


async def check_staged(company_id: int, adding: int = 0) -> None:
    """Refuse when the company's unfinished runs already hold `max_staged_bytes_per_company` (adding=0:
    checked before staging), or would with a new bundle of `adding` bytes (checked after staging it)."""
    limit = get_settings().max_staged_bytes_per_company
    held = await staged_in_flight(company_id)
    if held + adding > limit or (not adding and held >= limit):
        mib = 1024 * 1024
        message = (
            f"your company's runs awaiting approval, queued or running hold {held / mib:,.1f} MiB of staged "
            f"data; the limit is {limit / mib:,.1f} MiB"
        )
        if adding:
            message += f" and this proposal would stage {adding / mib:,.1f} MiB more"
        raise TooMuchStagedData(
            {
                "message": message + ". Approve, reject or wait for some of them first",
                "limit_bytes": limit,
                "in_flight_bytes": held,
                "bundle_bytes": adding,
            }
        )
