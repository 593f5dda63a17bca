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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from piccolo.columns.combination import WhereRaw
from piccolo.querystring import QueryString

from backend import clock
from backend.errors import AppError
from backend.runs.status import sql_list
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


@dataclass(frozen=True)
class Counts:
    """What the bounds on proposing count, in one query (`proposal_counts`)."""

    waiting: int  # the user's runs awaiting approval
    mine: int  # runs the user proposed in the last hour (not a schedule's firings)
    company: int  # runs the company's people proposed in the last hour


async def proposal_counts(ctx: UserContext, now: datetime | None = None) -> Counts:
    """The user's runs awaiting approval, and the user's and the company's proposals in the last hour, counted
    together by the database."""
    since = (now or clock.now()) - WINDOW
    waiting = '"run"."requested_by" = {} AND "run"."status" = {}'
    recent = '"run"."created_at" >= {} AND "run"."schedule_id" IS NULL'
    counting = QueryString(
        f'SUM(CASE WHEN {waiting} THEN 1 ELSE 0 END) AS "waiting", '
        f'SUM(CASE WHEN {recent} AND "run"."requested_by" = {{}} THEN 1 ELSE 0 END) AS "mine", '
        f'SUM(CASE WHEN {recent} THEN 1 ELSE 0 END) AS "company"',
        *(ctx.user_id, RunStatus.awaiting_approval.value),
        *(since, ctx.user_id),
        since,
    )
    either = WhereRaw(f"(({waiting}) OR ({recent}))", ctx.user_id, RunStatus.awaiting_approval.value, since)
    row = await Run.select(counting).where((Run.company == ctx.company_id) & either).first()
    return Counts(**{key: int((row or {}).get(key) or 0) for key in ("waiting", "mine", "company")})


async def check_rate(
    ctx: UserContext, runs: int = 1, now: datetime | None = None, counts: Counts | None = None
) -> None:
    """At most `max_proposals_per_user_per_hour` runs proposed by this user, and
    `max_proposals_per_company_per_hour` by the whole company, in the last hour, the `runs` this proposal
    makes (a flow's steps) included. Revisions and follow-ups are proposals; a schedule's firings are
    bounded by the schedule caps instead. `counts`: `proposal_counts` when the caller has them already."""
    s = get_settings()
    counts = counts or await proposal_counts(ctx, now)
    mine = counts.mine
    if mine + runs > s.max_proposals_per_user_per_hour:
        raise _rate_refusal("user", mine, runs, s.max_proposals_per_user_per_hour)
    company = counts.company
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
    company, user = await _held(company_id, user_id)
    return company if user_id is None else user


# `_held`'s two reads as SQL composed once: Piccolo built them anew at every proposal (check_staged runs twice
# in one), a fifth of a proposal's own CPU on the event loop
_STAGED_SUMS = (
    'SELECT SUM("staged_bytes") AS "sum", '
    'SUM(CASE WHEN "requested_by" = {} THEN "staged_bytes" ELSE 0 END) AS "mine" '
    f'FROM "run" WHERE "company" = {{}} AND "status" IN ({sql_list(IN_FLIGHT)})'
)
_KEPT_BUNDLES = (
    'SELECT "bundle_dir", "staged_bytes", "requested_by" FROM "run" '
    f'WHERE "company" = {{}} AND "status" IN ({sql_list(RETRYABLE)}) '
    'AND "flow_id" IS NULL AND "finished_at" >= {}'  # a flow's step loses its bundle when it ends
)


async def _held(company_id: int, user_id: int | None) -> tuple[int, int]:
    """(the company's staged bytes on disk, `user_id`'s of them): `staged_in_flight` of both, in two
    queries (one when failed runs keep no bundle)."""
    s = get_settings()
    total = (await Run.raw(_STAGED_SUMS, user_id, company_id) or [{}])[0]
    company_held = int(total.get("sum") or 0)
    user_held = int(total.get("mine") or 0)
    if s.failed_bundle_retention_days <= 0:
        return company_held, user_held
    # kept ones: inside the retention, and the sweep's period on top (the sweep deletes them that late)
    since = clock.now() - timedelta(days=s.failed_bundle_retention_days, minutes=s.bundle_sweep_minutes)
    kept = await Run.raw(_KEPT_BUNDLES, company_id, since)
    by_dir = {r["bundle_dir"]: r for r in kept if r["bundle_dir"]}
    present = await asyncio.to_thread(lambda: [d for d in by_dir if os.path.isdir(d)]) if by_dir else []
    company_held += sum(by_dir[d]["staged_bytes"] for d in present)
    user_held += sum(by_dir[d]["staged_bytes"] for d in present if by_dir[d]["requested_by"] == user_id)
    return company_held, user_held


async def check_staged(
    ctx: UserContext, staged: int = 0, bundle: int = 0, held: tuple[int, int] | None = None
) -> tuple[int, int]:
    """Refuse when the user's runs hold `max_staged_bytes_per_user` or the company's
    `max_staged_bytes_per_company` on disk: before staging a bundle (`bundle`=0), when they hold the limit
    already with the `staged` bytes this proposal staged before (a flow's earlier steps); after staging
    it, when the new `bundle` would take them over. Returns what they hold, (company's, user's), which the
    check after staging is given (`held`) instead of reading it again: neither check is atomic with the
    run's insert (two proposals staging at once both pass either way), so a second read a moment later
    narrows nothing that matters and cost two queries and a thread hop in every proposal."""
    s = get_settings()
    adding = staged + bundle
    company_held, user_held = held if held is not None else await _held(ctx.company_id, ctx.user_id)
    for scope, limit, taken in (
        ("company", s.max_staged_bytes_per_company, company_held),
        ("user", s.max_staged_bytes_per_user, user_held),
    ):
        if taken + adding > limit or (not bundle and taken + adding >= limit):
            raise _staged_refusal(scope, taken, adding, limit)
    return company_held, user_held


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
