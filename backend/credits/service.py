"""Credits are the meter, not the plan: every plan runs code; each run is charged from what it used."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, date, datetime
from typing import Any

from backend.audit import service as audit
from backend.credits.schemas import CreditUsage, DayUsage, FlowCharge, PersonUsage, Rates, RunCharge
from backend.credits.tables import CreditCharge
from backend.errors import PaymentRequired
from backend.tenancy.context import UserContext
from backend.tenancy.tables import Company, User

BASE_CHARGE = 1.0  # per run, also the minimum a pool must cover before a run is proposed or approved
PER_VCPU_SECOND = 0.02
PER_GIB_SECOND = 0.01


def period_start(now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def price(vcpus: int, memory_mib: int, seconds: float) -> tuple[float, float, float]:
    """(credits, vcpu_seconds, gib_seconds) for a run of `seconds` wall time."""
    vcpu_seconds = vcpus * seconds
    gib_seconds = memory_mib / 1024 * seconds
    credits = BASE_CHARGE + PER_VCPU_SECOND * vcpu_seconds + PER_GIB_SECOND * gib_seconds
    return math.ceil(credits * 100) / 100, round(vcpu_seconds, 3), round(gib_seconds, 3)


async def used(company_id: int) -> float:
    rows = await CreditCharge.select(CreditCharge.credits).where(
        (CreditCharge.company == company_id) & (CreditCharge.at >= period_start())
    )
    return round(sum(r["credits"] for r in rows), 2)


async def pool(company_id: int) -> int:
    row = await Company.select(Company.credit_pool).where(Company.id == company_id).first()
    return row["credit_pool"] if row else 0


async def blocked_reason(company_id: int) -> str | None:
    total = await pool(company_id)
    left = round(total - await used(company_id), 2)
    if left < BASE_CHARGE:
        return (
            f"the company's credit pool is used up ({left:.2f} of {total} credits left; a run needs at "
            f"least {BASE_CHARGE:.2f}); an admin can raise the pool"
        )
    return None


async def require_minimum(company_id: int) -> None:
    reason = await blocked_reason(company_id)
    if reason:
        raise PaymentRequired(reason)


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
) -> float:
    credits, vcpu_s, gib_s = price(vcpus, memory_mib, seconds)
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
        data={"credits": credits, "vcpu_seconds": vcpu_s, "gib_seconds": gib_s, "seconds": round(seconds, 3)},
    )
    return credits


async def usage(ctx: UserContext) -> CreditUsage:
    """The company's use this month; a member sees the pool, not who spent it (only their own rows)."""
    company_id = ctx.company_id
    start = period_start()
    rows = await CreditCharge.select().where(
        (CreditCharge.company == company_id) & (CreditCharge.at >= start)
    )
    emails = {
        u["id"]: u["email"] for u in await User.select(User.id, User.email).where(User.company == company_id)
    }
    by_day: dict[date, float] = defaultdict(float)
    by_user: dict[str, float] = defaultdict(float)
    per_run: dict[int, float] = defaultdict(float)
    per_flow: dict[int, list[float]] = defaultdict(list)  # each charged step of a flow
    charged: dict[int, dict[str, Any]] = {}  # a run's charge row: its title and the person who asked for it
    flows: dict[int, dict[str, Any]] = {}
    for r in rows:
        by_day[r["at"].astimezone(UTC).date()] += r["credits"]
        by_user[emails.get(r["user"], str(r["user"]))] += r["credits"]
        per_run[r["run_id"]] += r["credits"]
        charged[r["run_id"]] = r
        if r["flow_id"] is not None:
            per_flow[r["flow_id"]].append(r["credits"])
            flows[r["flow_id"]] = r
    top = sorted(per_run.items(), key=lambda kv: kv[1], reverse=True)[:10]
    total_pool = await pool(company_id)
    total_used = round(sum(by_day.values()), 2)
    by_user_rows = [
        PersonUsage(email=e, credits=round(c, 2)) for e, c in sorted(by_user.items(), key=lambda kv: -kv[1])
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
        remaining=round(total_pool - total_used, 2),
        period_start=start,
        minimum_charge=BASE_CHARGE,
        rates=Rates(base=BASE_CHARGE, per_vcpu_second=PER_VCPU_SECOND, per_gib_second=PER_GIB_SECOND),
        usage_by_day=[DayUsage(day=d, credits=round(c, 2)) for d, c in sorted(by_day.items())],
        usage_by_user=by_user_rows,
        costliest_runs=runs,
        costliest_flows=flow_rows,
    )
