"""Credits are the meter, not the plan: every plan runs code; each run is charged from what it used."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from piccolo.engine.postgres import PostgresEngine

from backend import clock, observe
from backend.audit import service as audit
from backend.credits import forecast as forecasting
from backend.credits.schemas import (
    ApprovalCost,
    CreditUsage,
    DayUsage,
    FlowCharge,
    KindUsage,
    LimitLeft,
    PersonUsage,
    Rates,
    RunCharge,
)
from backend.credits.tables import CreditCharge, CreditTopUp, PlatformCharge
from backend.errors import PaymentRequired
from backend.notify import service as notify
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Company, User

RUN = "run"  # the kind of a run's charge; the assistant platform's charges name their own (CHAT_TURN, ...)
CHAT_TURN = "chat_turn"
BASE_CHARGE = 1.0  # per run, also the minimum a pool must cover before a run is proposed or approved
PER_VCPU_SECOND = 0.02
PER_GIB_SECOND = 0.01
# PostgreSQL: a row of the API's lock table (`backend.locks`) inserted for the run and deleted again in the
# same transaction; another charge of the run inserting it waits for that transaction to end (its unique index)
CHARGE_LOCK = 'INSERT INTO "api_lock" ("name") VALUES ({})'
CHARGED_UNLOCKING = (
    'WITH "gone" AS (DELETE FROM "api_lock" WHERE "name" = {}) '
    'SELECT "credits" FROM "credit_charge" WHERE "run_id" = {} LIMIT 1'
)

# What approved runs not yet finished hold against the pool (their maximum cost), per company: the runs
# package registers the reader (backend/runs/holds.py); credits knows nothing of runs.
Holder = Callable[..., Awaitable[float]]  # (company_id, user_id=None): one person's runs' holds, or all
_holders: list[Holder] = []


def period_start(now: datetime | None = None) -> datetime:
    """The start of this period (the calendar month, UTC) or of the one `now` falls in."""
    return forecasting.period_start(now or clock.now())


def price(vcpus: int, memory_mib: int, seconds: float) -> tuple[float, float, float]:
    """(credits, vcpu_seconds, gib_seconds) for a run of `seconds` wall time."""
    vcpu_seconds = vcpus * seconds
    gib_seconds = memory_mib / 1024 * seconds
    credits = BASE_CHARGE + PER_VCPU_SECOND * vcpu_seconds + PER_GIB_SECOND * gib_seconds
    return math.ceil(credits * 100) / 100, round(vcpu_seconds, 3), round(gib_seconds, 3)


def kind_label(kind: str) -> str:
    """How a reason names a kind of charge: "runs", "chat turns", else the kind's own words."""
    return {RUN: "runs", CHAT_TURN: "chat turns"}.get(kind, kind.replace("_", " "))


async def charges(company_id: int, since: datetime, user_id: int | None = None) -> list[dict[str, Any]]:
    """Every charge of the company since `since` (optionally one person's), runs' and the platform's alike:
    {kind, user, credits, at, run_id, run_title, flow_id, flow_title}."""
    run_where = (CreditCharge.company == company_id) & (CreditCharge.at >= since)
    platform_where = (PlatformCharge.company == company_id) & (PlatformCharge.at >= since)
    if user_id is not None:
        run_where &= CreditCharge.user == user_id
        platform_where &= PlatformCharge.user == user_id
    rows = [{**r, "kind": RUN} for r in await CreditCharge.select().where(run_where)]
    for r in await PlatformCharge.select(
        PlatformCharge.kind, PlatformCharge.user, PlatformCharge.credits, PlatformCharge.at
    ).where(platform_where):
        rows.append({**r, "run_id": None, "run_title": "", "flow_id": None, "flow_title": ""})
    return rows


async def used_by_kind(company_id: int, since: datetime | None = None) -> dict[str, float]:
    """This period's charges per kind ("run", "chat_turn", ...)."""
    totals: dict[str, float] = defaultdict(float)
    for r in await charges(company_id, since or period_start()):
        totals[r["kind"]] += r["credits"]
    return {kind: round(c, 2) for kind, c in totals.items()}


async def used(company_id: int) -> float:
    """What this period's charges add up to: runs and the assistant platform's (chat turns, ...)."""
    return (await _pool_and_used(company_id))[1]


async def top_ups(company_id: int) -> int:
    """What the operator added to this period's pool (a top-up lasts until the period ends)."""
    rows = await CreditTopUp.select(CreditTopUp.credits).where(
        (CreditTopUp.company == company_id) & (CreditTopUp.at >= period_start())
    )
    return sum(r["credits"] for r in rows)


async def pool(company_id: int) -> int:
    """The company's pool this period: its plan's monthly credits (`Company.credit_pool`, set by the operator)
    and the operator's top-ups made this period."""
    return (await _pool_and_used(company_id))[0]


async def spent_by(company_id: int) -> str:
    """What used the pool this period, by kind, for a reason: "; chat turns used it up (chat turns 96.00,
    runs 4.00 credits)" when other kinds than runs were charged, else ""."""
    by_kind = {k: c for k, c in (await used_by_kind(company_id)).items() if c}
    if set(by_kind) <= {RUN}:
        return ""
    top = max(by_kind, key=lambda k: by_kind[k])
    parts = ", ".join(f"{kind_label(k)} {c:.2f}" for k, c in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    return f"; {kind_label(top)} used it up ({parts} credits this period)"


def max_cost(limits: dict[str, Any]) -> float:
    """The most a run may cost: its whole wall time at its vCPUs and memory (what its approval reserves)."""
    return price(limits["vcpus"], limits["memory_mib"], limits["wall_seconds"])[0]


def holder(reader: Holder) -> Holder:
    """Register what reads the credits a company's approved, unfinished runs hold (one reader, the runs')."""
    _holders.append(reader)
    return reader


async def reserved(company_id: int, user_id: int | None = None) -> float:
    return round(sum([await reader(company_id, user_id=user_id) for reader in _holders]), 2)


async def limits_left(
    company_id: int, user_id: int, company: dict[str, Any] | None = None
) -> list[LimitLeft]:
    """The company admin's limits within the pool as they stand for this person now: per person this period
    (what their charges and their approved runs' holds took) and per company a day (every charge today and
    every hold). Only the limits that are set; [] for none. `company`: its row, when the caller read it."""
    if company is None or company.get("id") != company_id:
        company = (
            await Company.select(Company.credit_limit_per_person, Company.credit_limit_per_day)
            .where(Company.id == company_id)
            .first()
        )
    if company is None:
        return []
    per_person, per_day = company["credit_limit_per_person"], company["credit_limit_per_day"]
    found = []
    if per_person:
        mine = sum(r["credits"] for r in await charges(company_id, period_start(), user_id))
        mine = round(mine + await reserved(company_id, user_id), 2)
        found.append(
            LimitLeft(kind="per_person", limit=per_person, taken=mine, left=round(per_person - mine, 2))
        )
    if per_day:
        today = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
        day = sum(r["credits"] for r in await charges(company_id, today))
        day = round(day + await reserved(company_id), 2)
        found.append(LimitLeft(kind="per_day", limit=per_day, taken=day, left=round(per_day - day, 2)))
    return found


async def limit_reason(
    company_id: int, user_id: int, cost: float, company: dict[str, Any] | None = None
) -> str | None:
    """Why `cost` more for this person would break a company admin's limit within the pool (per person a
    period, per company a day: what was charged, what approved runs hold, and `cost`), or None. `company`:
    its row, when the caller read it this request."""
    for limit in await limits_left(company_id, user_id, company):
        if limit.taken + cost <= limit.limit:
            continue
        if limit.kind == "per_person":
            return (
                f"this would take the person past the company's limit of {limit.limit} credits a person this "
                f"period: {limit.taken:.2f} used or held, {cost:.2f} more asked; a company admin sets the limit"
            )
        return (
            f"this would take the company past its limit of {limit.limit} credits a day: {limit.taken:.2f} used "
            f"or held today, {cost:.2f} more asked; a company admin sets the limit"
        )
    return None


Balance = tuple[int, float, float]  # (pool, held, left): what `balance` returns


async def approval_cost(
    company_id: int,
    user_id: int,
    cost: float,
    *,
    figures: Balance | None = None,
    company: dict[str, Any] | None = None,
) -> ApprovalCost:
    """What approving a run of maximum cost `cost` asked by `user_id` would hold, beside what is left: of the
    pool (less this period's charges and every hold) and, when it leaves less, of an admin's limit. The same
    figures `reserve` checks. `figures`: `balance(company_id)` when the caller has it already; `company`:
    its row."""
    total, held, pool_left = figures or await balance(company_id)
    tighter = None
    for limit in await limits_left(company_id, user_id, company):
        if limit.left < pool_left and (tighter is None or limit.left < tighter.left):
            tighter = limit
    left = tighter.left if tighter is not None else pool_left
    return ApprovalCost(
        max_cost=cost,
        pool=total,
        reserved=held,
        pool_left=pool_left,
        limit=tighter,
        left=left,
        covered=cost <= left,
    )


# The pool this period (the plan's credits and this period's top-ups) and what this period's charges (runs' and
# the platform's) used, summed by the database in one statement: `pool` and `used` add up the same. The one
# meter's two columns, read by every statement that needs them (the gate, the gauges, the pool's notices).
_POOL_AND_USED_COLUMNS = """
       c."credit_pool" + COALESCE(
         (SELECT SUM(t."credits") FROM "credit_top_up" t WHERE t."company" = c."id" AND t."at" >= {}), 0
       ) AS "pool",
       COALESCE(
         (SELECT SUM(CAST(r."credits" AS DOUBLE PRECISION)) FROM "credit_charge" r
           WHERE r."company" = c."id" AND r."at" >= {}), 0
       ) + COALESCE(
         (SELECT SUM(CAST(p."credits" AS DOUBLE PRECISION)) FROM "platform_charge" p
           WHERE p."company" = c."id" AND p."at" >= {}), 0
       ) AS "used"
"""
_POOL_AND_USED_ALL = 'SELECT c."id" AS "id",' + _POOL_AND_USED_COLUMNS + ' FROM "company" c'
_POOL_AND_USED = _POOL_AND_USED_ALL + ' WHERE c."id" = {}'


async def _pool_and_used(company_id: int) -> tuple[int, float]:
    """(pool, used) this period in one query: what `pool`, `used` and `balance` all read."""
    since = period_start()
    rows = await Company.raw(_POOL_AND_USED, since, since, since, company_id)
    if not rows:
        return 0, 0.0
    return int(rows[0]["pool"]), round(float(rows[0]["used"]), 2)


async def pools_and_used() -> dict[int, tuple[int, float]]:
    """Every company's (pool, used) this period, in the one statement (/metrics: a pool nearly spent)."""
    since = period_start()
    rows = await Company.raw(_POOL_AND_USED_ALL, since, since, since)
    return {row["id"]: (int(row["pool"]), round(float(row["used"]), 2)) for row in rows}


async def balance(company_id: int, *, holds: bool = True) -> Balance:
    """(pool, held, left): left is the pool less this period's charges and, with `holds`, less what
    approved runs not yet finished hold. Two queries: the pool and what was used (`_POOL_AND_USED`), the
    holds."""
    total, spent = await _pool_and_used(company_id)
    held = await reserved(company_id) if holds else 0.0
    return total, held, round(total - spent - held, 2)


async def blocked_reason(
    company_id: int, *, holds: bool = True, figures: Balance | None = None
) -> str | None:
    """Why no run may be proposed or approved now (less than one base charge left), or None. Without
    `holds` (a run about to start, which holds its own reservation) only what was charged counts.
    `figures`: `balance(company_id, holds=holds)` when the caller has it already."""
    total, held, left = figures or await balance(company_id, holds=holds)
    if left < BASE_CHARGE:
        also = f", {held:.2f} of them held by approved runs not yet finished" if held else ""
        return (
            f"the company's credit pool is used up ({max(left, 0):.2f} of {total} credits left{also}; a run "
            f"needs at least {BASE_CHARGE:.2f}){await spent_by(company_id)}; it fills again when the next "
            "period starts, or the operator can top it up"
        )
    return None


async def lock_company(company_id: int) -> None:
    """Serialize what spends a company's credits against what is left (a reservation, a platform charge)
    inside the caller's transaction. PostgreSQL: the company's row locked FOR NO KEY UPDATE, which two
    spenders of one company cannot both hold, so each reads the spending of those before it; SQLite needs
    nothing, its write transaction holding the database's lock from BEGIN IMMEDIATE.

    Not FOR UPDATE: that strength also blocks the FOR KEY SHARE lock PostgreSQL takes on the company's row
    for every row inserted that references it (a run, a charge, an action item), so while any approval or
    charge of a company waited for its commit, every proposal of that company waited with it. Measured at a
    thousand assistants of one company, making the run took 261 ms in the slowest twentieth of proposals,
    its INSERT waiting behind charges and approvals (docs/scale.md, item 14)."""
    if isinstance(Company._meta.db, PostgresEngine):
        await Company.select(Company.id).where(Company.id == company_id).lock_rows("NO KEY UPDATE")


async def _lock_charge_of(run_id: int) -> float | None:
    """Serialize the charges of one run inside the caller's transaction, and return what the run was charged
    before (None: nothing yet). SQLite: its write transaction already holds the database's lock. PostgreSQL:
    a row `charge:<run>` inserted into `api_lock`: another transaction inserting the same waits on the
    unique index until this one ends, whatever this one does with the row meanwhile; so the next statement
    deletes it again (no row is left behind) while it reads the charge, in a snapshot taken after the wait.
    Two statements, as the advisory lock and the read were. Not the company's row: a charge spends what the
    run's approval already reserved and reads nothing of what is left, so it needs no turn among the
    company's reservations, and it took one at every result. Not an advisory key: those any database role
    can take, a fleet host's too (issue 52, D-M1); `api_lock` is out of its reach."""
    if isinstance(CreditCharge._meta.db, PostgresEngine):
        name = f"charge:{run_id}"
        await CreditCharge.raw(CHARGE_LOCK, name)
        rows = await CreditCharge.raw(CHARGED_UNLOCKING, name, run_id)
        return rows[0]["credits"] if rows else None
    charged = await CreditCharge.select(CreditCharge.credits).where(CreditCharge.run_id == run_id).first()
    return None if charged is None else charged["credits"]


async def reserve(
    company_id: int,
    cost: float,
    *,
    what: str = "this run",
    user_id: int | None = None,
    company: dict[str, Any] | None = None,
) -> None:
    """Hold `cost` against what is left, or PaymentRequired saying what is left. Only inside the write
    transaction that then stores the holding runs (`audit.atomic()`): on PostgreSQL the company's row is
    locked first, so every reservation of a company reads the holds of those before it (committed) and
    none after it; on SQLite that transaction holds the database's write lock from its BEGIN IMMEDIATE.
    Either way two approvals never both spend the same credits. `company`: its row as the caller read it
    this request, for the admin's limits (one query less while the company's row is locked)."""
    engine = Company._meta.db
    if engine.current_transaction.get() is None:
        raise RuntimeError("credits.reserve runs inside the transaction that stores the reservation")
    await lock_company(company_id)
    total, held, left = await balance(company_id)
    if cost > left:
        also = f", {held:.2f} held by approved runs not yet finished" if held else ""
        raise PaymentRequired(
            f"the company's credit pool cannot cover the maximum cost of {what}, {cost:.2f} credits: "
            f"{max(left, 0):.2f} of {total} credits are left{also}{await spent_by(company_id)}; lower its "
            "limits, or the operator can top the pool up"
        )
    if user_id is not None and (reason := await limit_reason(company_id, user_id, cost, company)):
        raise PaymentRequired(reason, code="credit_limit")


async def require_minimum(company_id: int) -> Balance:
    """PaymentRequired when less than one base charge is left; else the figures it read (`balance`), for a
    caller that shows them in the same request (a proposal's answer) instead of reading them again."""
    figures = await balance(company_id)
    reason = await blocked_reason(company_id, figures=figures)
    if reason:
        raise PaymentRequired(reason)
    return figures


async def charge(
    *,
    company_id: int,
    user_id: int,
    run_id: int,
    run_title: str,
    vcpus: int,
    memory_mib: int,
    seconds: float,
    actor: str,
    flow_id: int | None = None,
    flow_title: str = "",
    reserved_credits: float | None = None,
) -> float:
    """Charge a run what it used; never more than its approval reserved (`reserved_credits`, the maximum
    the approver was shown), so a run that overran its wall time by the host's margin cannot overdraw. A run
    is charged once: a second charge of it (a fleet host posting its result again after the API stopped
    between charging and ending the run; the soak's kill_api found it) returns the first. The look-up, the
    charge and its `credits.charged` entry are one transaction, serialized per run (`_lock_charge_of`), so
    two posts of one result at once charge it once, and a charge never lands without its entry."""
    credits, vcpu_s, gib_s = price(vcpus, memory_mib, seconds)
    data: dict[str, Any] = {}
    cap = round(reserved_credits or 0, 2)  # stored as REAL: single precision on PostgreSQL
    if cap and credits > cap:
        credits, data["capped_at_reservation"] = cap, cap
    async with audit.atomic():
        charged = await _lock_charge_of(run_id)
        if charged is not None:  # its result posted again (the API stopped after charging it): charged once
            return charged
        await CreditCharge.insert(
            CreditCharge(
                company=company_id,
                user=user_id,
                run_id=run_id,
                run_title=run_title,
                flow_id=flow_id,
                flow_title=flow_title[:200],
                credits=credits,
                vcpu_seconds=vcpu_s,
                gib_seconds=gib_s,
                at=datetime.now(UTC),
            )
        )
        await audit.record(
            "credits.charged",
            actor=actor,
            company_id=company_id,
            subject_type="run",
            subject_id=run_id,
            data={
                "credits": credits,
                "vcpu_seconds": vcpu_s,
                "gib_seconds": gib_s,
                "seconds": round(seconds, 3),
                **data,
            },
        )
    observe.count_charge(RUN, credits)  # once committed; a replay above returned before
    return credits


POOL_THRESHOLDS = (80, 100)  # percent of the pool used this period at which the company's admins are told

# Every company's pool and use this period in one statement (as `_POOL_AND_USED`), with what it was last told
_POOLS = (
    'SELECT c."id" AS "id", c."name" AS "name", c."webhook_endpoints" AS "webhook_endpoints", '
    'c."pool_told" AS "pool_told",' + _POOL_AND_USED_COLUMNS + ' FROM "company" c'
)


async def tell_pools() -> list[tuple[int, int]]:
    """The companies whose use this period crossed 80 % or 100 % of their pool since they were last told:
    their admins (and webhooks) are told, once per threshold and period (`Company.pool_told`, set
    conditionally: of two processes passing at once one tells). Run by every serving process's notifier
    loop, so a charge (a run's, the platform's) never pays for it. Returns (company, percent) told."""
    since = period_start()
    period = since.date().isoformat()
    told = []
    for row in await Company.raw(_POOLS, since, since, since):
        pool, used = float(row["pool"] or 0), float(row["used"] or 0)
        reached = max(
            (p for p in POOL_THRESHOLDS if pool > 0 and used >= pool * p / 100 - 0.005), default=None
        )
        if reached is None:
            continue
        last_period, _, last = (row["pool_told"] or "").partition(":")
        if last_period == period and last.isdigit() and int(last) >= reached:
            continue
        mark = f"{period}:{reached}"
        won = (
            await Company.update({Company.pool_told: mark})
            .where((Company.id == row["id"]) & (Company.pool_told == (row["pool_told"] or "")))
            .returning(Company.id)
        )
        if not won:
            continue
        notice = notify.Notice(
            event=f"credits.pool_{reached}",
            company_id=row["id"],
            subject_type="credits",
            subject_id=None,
            path="/credits",
            status=f"{reached}%",
        )
        await notify.emit(notice, lambda c=row["id"]: notify.admins(c), company=row)
        told.append((row["id"], reached))
    return told


async def usage(ctx: UserContext) -> CreditUsage:
    """The company's use this period, runs and the platform's charges side by side (per kind, per person,
    per day); a member sees the pool, not who spent it (only their own people and runs rows)."""
    company_id = ctx.company_id
    now = clock.now()
    start = period_start(now)
    rows = await charges(company_id, start)
    this_week: dict[str, float] = defaultdict(
        float
    )  # the forecast's window runs back across the period's start
    for r in await charges(company_id, now - timedelta(days=forecasting.WINDOW_DAYS)):
        this_week[r["kind"]] += r["credits"]
    emails = {
        u["id"]: u["email"] for u in await User.select(User.id, User.email).where(User.company == company_id)
    }
    by_day: dict[date, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_user: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_kind: dict[str, float] = defaultdict(float)
    per_run: dict[int, float] = defaultdict(float)
    per_flow: dict[int, list[float]] = defaultdict(list)  # each charged step of a flow
    charged: dict[int, dict[str, Any]] = {}  # a run's charge row: its title and the person who asked for it
    flows: dict[int, dict[str, Any]] = {}
    for r in rows:
        kind = r["kind"]
        by_day[r["at"].astimezone(UTC).date()][kind] += r["credits"]
        by_user[emails.get(r["user"], str(r["user"]))][kind] += r["credits"]
        by_kind[kind] += r["credits"]
        if kind != RUN:
            continue
        per_run[r["run_id"]] += r["credits"]
        charged[r["run_id"]] = r
        if r["flow_id"] is not None:
            per_flow[r["flow_id"]].append(r["credits"])
            flows[r["flow_id"]] = r
    top = sorted(per_run.items(), key=lambda kv: kv[1], reverse=True)[:10]
    company = await Company.select().where(Company.id == company_id).first()
    assert company is not None
    added = await top_ups(company_id)
    total_pool = company["credit_pool"] + added
    total_used = round(sum(by_kind.values()), 2)
    held = await reserved(company_id)
    by_user_rows = [
        PersonUsage(email=e, credits=round(sum(k.values()), 2), by_kind=_rounded(k))
        for e, k in sorted(by_user.items(), key=lambda kv: -sum(kv[1].values()))
    ]
    runs = [
        RunCharge(
            id=run_id,
            title=charged[run_id]["run_title"],
            email=emails.get(charged[run_id]["user"], ""),
            credits=round(c, 2),
        )
        for run_id, c in top
    ]
    flow_rows = [
        FlowCharge(
            id=flow_id,
            title=flows[flow_id]["flow_title"],
            email=emails.get(flows[flow_id]["user"], ""),
            steps_charged=len(steps),
            credits=round(sum(steps), 2),
        )
        for flow_id, steps in sorted(per_flow.items(), key=lambda kv: -sum(kv[1]))[:10]
    ]
    if not ctx.is_admin:
        by_user_rows = [u for u in by_user_rows if u.email == ctx.email]
        runs = [r for r in runs if r.email == ctx.email]
        flow_rows = [f for f in flow_rows if f.email == ctx.email]
    return CreditUsage(
        pool=total_pool,
        used=total_used,
        reserved=held,
        remaining=round(total_pool - total_used - held, 2),
        period_start=start,
        minimum_charge=BASE_CHARGE,
        rates=Rates(base=BASE_CHARGE, per_vcpu_second=PER_VCPU_SECOND, per_gib_second=PER_GIB_SECOND),
        usage_by_day=[
            DayUsage(day=d, credits=round(sum(k.values()), 2), by_kind=_rounded(k))
            for d, k in sorted(by_day.items())
        ],
        usage_by_user=by_user_rows,
        costliest_runs=runs,
        costliest_flows=flow_rows,
        usage_by_kind=[
            KindUsage(kind=k, label=kind_label(k), credits=round(c, 2))
            for k, c in sorted(by_kind.items(), key=lambda kv: -kv[1])
        ],
        plan=company["plan"],
        plan_credits=company["credit_pool"],
        top_ups=added,
        limit_per_person=company["credit_limit_per_person"],
        limit_per_day=company["credit_limit_per_day"],
        period_end=forecasting.period_end(now),
        forecast=forecasting.forecast(
            pool=total_pool,
            used=total_used,
            reserved=held,
            charged_this_week=this_week,
            now=now,
            minimum=BASE_CHARGE,
        ),
    )


def _rounded(by_kind: dict[str, float]) -> dict[str, float]:
    return {k: round(c, 2) for k, c in sorted(by_kind.items())}
