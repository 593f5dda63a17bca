"""Plans and pools belong to the operator (the host's CLI): plans (name → monthly credits), which plan a
company is on, and top-ups. Each change is audited. A company admin sets limits within the pool (per person,
per day; tenancy's settings) and cannot raise it.

A company's pool for a period is its plan's monthly credits (kept on the company when the operator assigns
the plan, and again when the operator changes the plan's credits) plus the top-ups made in that period; the
period is the calendar month in UTC (`service.period_start`), so each month starts full again."""

from __future__ import annotations

from typing import Any

from backend import clock
from backend.audit import service as audit
from backend.credits.tables import CreditPlan, CreditTopUp
from backend.errors import Invalid, NotFound
from backend.tenancy.tables import PLANS, Company

MAX_MONTHLY = 100_000_000
MAX_TOP_UP = 10_000_000


async def plans() -> dict[str, int]:
    """Every plan and its monthly credits: the operator's, over the built-in defaults they replace."""
    defined = {r["name"]: r["monthly_credits"] for r in await CreditPlan.select()}
    return {**PLANS, **defined}


async def set_plan(name: str, monthly_credits: int, *, actor: str) -> dict[str, Any]:
    """Define or change a plan; the companies on it get its new pool at once. Audited."""
    name = name.strip().lower()
    if not name or len(name) > 20 or not name.replace("_", "").replace("-", "").isalnum():
        raise Invalid("a plan's name: 1 to 20 letters, digits, - or _")
    if not 0 <= monthly_credits <= MAX_MONTHLY:
        raise Invalid(f"a plan's monthly credits: 0 to {MAX_MONTHLY}")
    before = (await plans()).get(name)
    async with audit.atomic():
        if await CreditPlan.exists().where(CreditPlan.name == name):
            await CreditPlan.update(
                {CreditPlan.monthly_credits: monthly_credits, CreditPlan.updated_at: clock.now()}
            ).where(CreditPlan.name == name)
        else:
            await CreditPlan.insert(
                CreditPlan(name=name, monthly_credits=monthly_credits, updated_at=clock.now())
            )
        companies = await Company.select(Company.id).where(Company.plan == name)
        await Company.update({Company.credit_pool: monthly_credits}).where(Company.plan == name)
        await audit.record(
            "plan.set",
            actor=actor,
            company_id=None,
            subject_type="plan",
            subject_id=name,
            data={"from": before, "to": monthly_credits, "companies": len(companies)},
        )
        for c in companies:
            await audit.record(
                "credits.pool_changed",
                actor=actor,
                company_id=c["id"],
                subject_type="company",
                subject_id=c["id"],
                data={"plan": name, "monthly_credits": monthly_credits, "from": before},
            )
    return {"name": name, "monthly_credits": monthly_credits, "companies": len(companies)}


async def company_ref(ref: str) -> dict[str, Any]:
    """A company by its name or its id."""
    where = Company.id == int(ref) if ref.isdigit() else Company.name == ref
    row = (
        await Company.select(Company.id, Company.name, Company.plan, Company.credit_pool).where(where).first()
    )
    if row is None:
        raise NotFound(f"no company {ref!r}")
    return row


async def assign(company: str, plan: str, *, actor: str) -> dict[str, Any]:
    """Put a company on a plan: its pool becomes the plan's monthly credits. Audited."""
    row = await company_ref(company)
    known = await plans()
    if plan not in known:
        raise NotFound(f"no plan {plan!r}; plans: {', '.join(sorted(known))}")
    async with audit.atomic():
        await Company.update({Company.plan: plan, Company.credit_pool: known[plan]}).where(
            Company.id == row["id"]
        )
        await audit.record(
            "credits.plan_assigned",
            actor=actor,
            company_id=row["id"],
            subject_type="company",
            subject_id=row["id"],
            data={
                "plan": {"from": row["plan"], "to": plan},
                "credit_pool": {"from": row["credit_pool"], "to": known[plan]},
            },
        )
    return {"company": row["name"], "plan": plan, "credit_pool": known[plan]}


async def top_up(company: str, amount: int, *, reason: str, actor: str) -> dict[str, Any]:
    """Add `amount` credits to the company's pool for this period. Audited, with the reason."""
    row = await company_ref(company)
    if not 0 < amount <= MAX_TOP_UP:
        raise Invalid(f"a top-up: 1 to {MAX_TOP_UP} credits")
    reason = reason.strip()
    if not reason:
        raise Invalid("a top-up needs a reason (--reason)")
    async with audit.atomic():
        entry = CreditTopUp(
            company=row["id"], credits=amount, reason=reason[:500], actor=actor, at=clock.now()
        )
        await entry.save()
        await audit.record(
            "credits.topped_up",
            actor=actor,
            company_id=row["id"],
            subject_type="company",
            subject_id=row["id"],
            data={"credits": amount, "reason": reason[:500], "top_up_id": entry.id},
        )
    return {"company": row["name"], "credits": amount, "reason": reason[:500], "id": entry.id}


async def start_company(
    name: str, admin_email: str, *, plan: str | None, actor: str, admin_name: str = ""
) -> dict[str, Any]:
    """The operator starts a company on a plan (default `team`) with its first admin, who gets a one-time link
    to set a password (tenancy/people.py writes both; the plan's credits are the operator's, read here)."""
    from backend.tenancy import people

    plan = plan or "team"
    known = await plans()
    if plan not in known:
        raise NotFound(f"no plan {plan!r}; plans: {', '.join(sorted(known))}")
    return await people.create_company(
        name, admin_email, admin_name=admin_name, plan=plan, credit_pool=known[plan], actor=actor
    )
