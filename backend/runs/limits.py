"""Bounded work: how many proposals a user and a company may make in an hour, and how many staged bytes of
company data a user's and a company's runs may hold on disk. Each proposal stages a bundle (exports, every
named Drive file converted in its own child) before anyone decides about it, so proposals are not free. A
flow's steps are runs: a flow of n steps counts n against every limit, and its bundles add up.

Operator settings (backend/settings.py): `max_proposals_per_user_per_hour`,
`max_proposals_per_company_per_hour`, `max_staged_bytes_per_user`, `max_staged_bytes_per_company`. A
refusal is 429 with its own code. The checks are counts, not locks: two proposals racing past the same
check may overshoot a limit by the bundles staged at that moment, never by more.

Staged bytes on disk are those of runs not yet ended and of failed runs that keep their bundle for a
revision (`failed_bundle_retention_days`) while it is still there: a user whose runs keep failing holds
their bundles for days, and must not stage without bound meanwhile.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta
from typing import Any

from piccolo.query.functions.aggregate import Sum

from backend import clock
from backend.errors import AppError
from backend.runs.tables import RETRYABLE, Run, RunStatus
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


async def check_rate(ctx: UserContext, runs: int = 1, now: datetime | None = None) -> None:
    """At most `max_proposals_per_user_per_hour` runs proposed by this user, and
    `max_proposals_per_company_per_hour` by the whole company, in the last hour, the `runs` this proposal
    makes (a flow's steps) included. Revisions and follow-ups are proposals; a schedule's firings are
    bounded by the schedule caps instead."""
    s = get_settings()
    since = (now or clock.now()) - WINDOW
    recent = (Run.company == ctx.company_id) & (Run.created_at >= since) & (Run.schedule_id.is_null())
    mine = await Run.count().where(recent & (Run.requested_by == ctx.user_id))
    if mine + runs > s.max_proposals_per_user_per_hour:
        raise _rate_refusal("user", mine, runs, s.max_proposals_per_user_per_hour)
    company = await Run.count().where(recent)
    if company + runs > s.max_proposals_per_company_per_hour:
        raise _rate_refusal("company", company, runs, s.max_proposals_per_company_per_hour)


def _rate_refusal(scope: str, made: int, runs: int, limit: int) -> TooManyProposals:
    who = "you have" if scope == "user" else "your company has"
    adds = f", and this flow's {runs} steps would make {made + runs}" if runs > 1 else ""
    return TooManyProposals(
        {
            "message": f"{who} proposed {made} runs in the last hour{adds}; the limit is {limit} per "
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


async def staged_in_flight(company_id: int, user_id: int | None = None) -> int:
    """Bytes staged for the company's (or one of its users') runs whose bundle is on disk: runs that have
    not ended (awaiting approval, queued, waiting, running), and failed runs that keep theirs for a
    revision, until the worker's sweep deletes it (the folder is looked at: a run refused before its VM
    started lost its bundle at once, whatever its status says). Each run's `staged_bytes` is what its
    manifest lists, stored when it is made, so the runs in flight are summed by the database, not decoded
    one by one (a backlog awaiting approval made every proposal slower)."""
    s = get_settings()
    scope = Run.company == company_id
    if user_id is not None:
        scope &= Run.requested_by == user_id
    total = await Run.select(Sum(Run.staged_bytes)).where(scope & Run.status.is_in(list(IN_FLIGHT))).first()
    held = int((total or {}).get("sum") or 0)
    if s.failed_bundle_retention_days <= 0:
        return held
    # kept ones: inside the retention, and the sweep's period on top (the sweep deletes them that late)
    since = clock.now() - timedelta(days=s.failed_bundle_retention_days, minutes=s.bundle_sweep_minutes)
    kept = await Run.select(Run.bundle_dir, Run.staged_bytes).where(
        scope
        & Run.status.is_in(list(RETRYABLE))
        & Run.flow_id.is_null()  # a flow's step loses its bundle when it ends
        & (Run.finished_at >= since)
    )
    by_dir = {r["bundle_dir"]: r["staged_bytes"] for r in kept if r["bundle_dir"]}
    present = await asyncio.to_thread(lambda: [d for d in by_dir if os.path.isdir(d)])
    return held + sum(by_dir[d] for d in present)


async def check_staged(ctx: UserContext, staged: int = 0, bundle: int = 0) -> None:
    """Refuse when the user's runs hold `max_staged_bytes_per_user` or the company's
    `max_staged_bytes_per_company` on disk: before staging a bundle (`bundle`=0), when they hold the limit
    already with the `staged` bytes this proposal staged before (a flow's earlier steps); after staging
    it, when the new `bundle` would take them over."""
    s = get_settings()
    adding = staged + bundle
    for scope, limit, user in (
        ("company", s.max_staged_bytes_per_company, None),
        ("user", s.max_staged_bytes_per_user, ctx.user_id),
    ):
        held = await staged_in_flight(ctx.company_id, user)
        if held + adding > limit or (not bundle and held + adding >= limit):
            raise _staged_refusal(scope, held, adding, limit)


def _staged_refusal(scope: str, held: int, adding: int, limit: int) -> TooMuchStagedData:
    mib = 1024 * 1024
    whose = "your" if scope == "user" else "your company's"
    message = (
        f"{whose} runs awaiting approval, queued or running, and failed runs kept for a revision, hold "
        f"{held / mib:,.1f} MiB of staged data; the limit is {limit / mib:,.1f} MiB per {scope}"
    )
    if adding:
        message += f" and this proposal would stage {adding / mib:,.1f} MiB more"
    return TooMuchStagedData(
        {
            "message": message + ". Approve, reject or wait for some of them first",
            "scope": scope,
            "limit_bytes": limit,
            "in_flight_bytes": held,
            "bundle_bytes": adding,
        }
    )
