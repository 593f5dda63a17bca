"""The assistant platform charges what already happened (a chat turn, or another kind it names) to the same
pool runs draw on, with an operator-issued credential of its own: not a person, not an assistant.

The credential (`Bearer cpt_…`, `cleanroom platform token create NAME --company NAME [--company ...]`, or
`--all-companies` as the operator's explicit choice) is kept only as its hash and reaches the platform routes
(/api/platform/...) alone: a person's session or an assistant's token is refused there (401), and the
platform's credential is refused everywhere else (it is no personal API token: 401). It charges only the
companies it names: another company is answered as an unknown one (404, audited for the operator). A
credential made before credentials were scoped names none and charges nobody until the operator scopes it
(`cleanroom platform token scope ID ...`, 403 until then).

A charge names its company, its person (of that company), its kind, its credits and an idempotency key. The
same key again from the same credential is charged once: the first answer comes back unchanged; the same key
with anything else different is 409. Keys are the credential's own: another credential's same key is another
charge, and never names that credential's. A charge over what is left is still recorded (the turn already
happened) as far as `platform_overdraft_credits` below zero: the pool is then used up, and runs are refused
with a reason that says what used it. A charge that would take the pool further is refused (402
`overdraft_bound`), recorded nowhere but the audit trail.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from backend import clock, observe
from backend.audit import service as audit
from backend.credits import service as credits
from backend.credits.tables import PlatformCharge, PlatformToken, PlatformTokenCompany
from backend.errors import Conflict, Forbidden, Invalid, NotAuthenticated, NotFound, PaymentRequired
from backend.hashing import sha256_text
from backend.settings import get_settings
from backend.tenancy.tables import Company, User

TOKEN_PREFIX = "cpt_"
KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_CREDITS = 100_000.0  # one charge at most: a typo of the platform's should not empty a year of pools


def _actor(token: dict[str, Any]) -> str:
    return f"platform:{token['name']} (token {token['id']})"


def token_key(token_id: int, key: str) -> str:
    """What makes a charge unique: the credential and its idempotency key together (a copy lives in
    migration 2026-12-06T04:30:02; change neither alone)."""
    return sha256_text(f"{token_id}\n{key}")


async def _scope(companies: list[int | str], all_companies: bool) -> list[dict[str, Any]]:
    """The companies a credential is to charge: named ones (each must exist), or every one as an explicit
    choice; neither, or both, is refused."""
    if all_companies and companies:
        raise Invalid("name companies (--company) or choose --all-companies, not both")
    if not all_companies and not companies:
        raise Invalid(
            "a platform credential charges only the companies it names: --company NAME (repeatable), "
            "or --all-companies as an explicit choice"
        )
    rows: dict[int, dict[str, Any]] = {}
    for ref in companies:
        where = Company.id == ref if isinstance(ref, int) else Company.name == ref
        row = await Company.select(Company.id, Company.name).where(where).first()
        if row is None:
            raise NotFound(f"no company {ref!r}")
        rows[row["id"]] = row
    return sorted(rows.values(), key=lambda r: r["id"])


async def _set_scope(token_id: int, companies: list[dict[str, Any]], all_companies: bool) -> None:
    await PlatformTokenCompany.delete().where(PlatformTokenCompany.token == token_id)
    for company in companies:
        await PlatformTokenCompany(token=token_id, company=company["id"]).save()
    await PlatformToken.update({PlatformToken.all_companies: all_companies}).where(
        PlatformToken.id == token_id
    )


def _scope_data(companies: list[dict[str, Any]], all_companies: bool) -> dict[str, Any]:
    if all_companies:
        return {"all_companies": True}
    return {"all_companies": False, "companies": [{"id": c["id"], "name": c["name"]} for c in companies]}


async def create_token(
    name: str,
    *,
    created_by: str,
    companies: list[int | str] | None = None,
    all_companies: bool = False,
) -> dict[str, Any]:
    """A new platform credential for the companies named (or every company, chosen explicitly); the plain
    token is returned once, only its hash is kept. Audited."""
    name = name.strip()
    if not name or len(name) > 100:
        raise Invalid("a platform credential needs a name of at most 100 characters")
    scope = await _scope(list(companies or []), all_companies)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = PlatformToken(
        name=name,
        prefix=token[:10],
        token_hash=sha256_text(token),
        created_at=clock.now(),
        created_by=created_by,
        all_companies=all_companies,
    )
    async with audit.atomic():
        await row.save()
        await _set_scope(row.id, scope, all_companies)
        await audit.record(
            "platform.token_created",
            actor=created_by,
            company_id=None,
            subject_type="platform_token",
            subject_id=row.id,
            data={"name": name, "prefix": row.prefix, **_scope_data(scope, all_companies)},
        )
    return {
        "id": row.id,
        "name": name,
        "prefix": row.prefix,
        "token": token,
        **_scope_data(scope, all_companies),
    }


async def scope_token(
    token_id: int, *, actor: str, companies: list[int | str] | None = None, all_companies: bool = False
) -> dict[str, Any]:
    """Replace the companies a credential may charge (how a credential made before scopes existed charges
    again). Audited, with the scope before and after."""
    row = await PlatformToken.select().where(PlatformToken.id == token_id).first()
    if row is None:
        raise NotFound(f"no platform credential {token_id}")
    scope = await _scope(list(companies or []), all_companies)
    before = await _scope_of(row)
    async with audit.atomic():
        await _set_scope(token_id, scope, all_companies)
        await audit.record(
            "platform.token_scoped",
            actor=actor,
            company_id=None,
            subject_type="platform_token",
            subject_id=token_id,
            data={
                "name": row["name"],
                "prefix": row["prefix"],
                "before": _scope_data(before, bool(row["all_companies"])),
                **_scope_data(scope, all_companies),
            },
        )
    return {"id": token_id, "name": row["name"], "prefix": row["prefix"], **_scope_data(scope, all_companies)}


async def _scope_of(token: dict[str, Any]) -> list[dict[str, Any]]:
    return list(
        await PlatformTokenCompany.select(
            PlatformTokenCompany.company.id.as_alias("id"),
            PlatformTokenCompany.company.name.as_alias("name"),
        )
        .where(PlatformTokenCompany.token == token["id"])
        .order_by(PlatformTokenCompany.company)
    )


async def revoke_token(token_id: int, *, actor: str) -> dict[str, Any]:
    row = await PlatformToken.select().where(PlatformToken.id == token_id).first()
    if row is None:
        raise NotFound(f"no platform credential {token_id}")
    async with audit.atomic():
        await PlatformToken.update({PlatformToken.revoked: True}).where(PlatformToken.id == token_id)
        await audit.record(
            "platform.token_revoked",
            actor=actor,
            company_id=None,
            subject_type="platform_token",
            subject_id=token_id,
            data={"name": row["name"], "prefix": row["prefix"]},
        )
    return {**row, "revoked": True}


async def tokens() -> list[dict[str, Any]]:
    """Every credential with the companies it may charge (`companies`: names; `all_companies`)."""
    rows = list(
        await PlatformToken.select(
            PlatformToken.id,
            PlatformToken.name,
            PlatformToken.prefix,
            PlatformToken.created_at,
            PlatformToken.created_by,
            PlatformToken.last_used_at,
            PlatformToken.revoked,
            PlatformToken.all_companies,
        ).order_by(PlatformToken.id)
    )
    for row in rows:
        row["companies"] = [c["name"] for c in await _scope_of(row)]
    return rows


async def token_for(header: str) -> dict[str, Any]:
    """The platform credential an `Authorization: Bearer cpt_…` header carries; 401 for anything else (a
    person's session, an assistant's token, a worker's, a revoked or unknown platform credential)."""
    scheme, _, token = (header or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX):
        raise NotAuthenticated(
            "the platform routes take only the assistant platform's credential: "
            "'Authorization: Bearer <platform credential>' (`cleanroom platform token create`)"
        )
    row = await PlatformToken.select().where(PlatformToken.token_hash == sha256_text(token)).first()
    if row is None or row["revoked"]:
        raise NotAuthenticated("this platform credential is not valid (revoked or never issued)")
    if clock.last_used_is_stale(row["last_used_at"]):
        await PlatformToken.update({PlatformToken.last_used_at: clock.now()}).where(
            PlatformToken.id == row["id"]
        )
    return row


async def _company(token: dict[str, Any], ref: int | str) -> dict[str, Any]:
    """The company a charge names, if this credential may charge it. One answer (404) for a company that
    does not exist and one the credential does not name: the credential learns nothing of the others; the
    operator's audit trail records the attempt on another's. A credential naming no company is 403."""
    if not token["all_companies"]:
        allowed = {c["id"] for c in await _scope_of(token)}
        if not allowed:
            raise Forbidden(
                "this platform credential names no company it may charge (it was made before credentials "
                f"were scoped); the operator scopes it: `cleanroom platform token scope {token['id']} "
                "--company NAME` (or --all-companies)",
                code="platform_unscoped",
            )
    where = Company.id == ref if isinstance(ref, int) else Company.name == ref
    row = await Company.select(Company.id, Company.name).where(where).first()
    if row is not None and not token["all_companies"] and row["id"] not in allowed:
        await audit.record(
            "credits.platform_charge_refused",
            actor=_actor(token),
            company_id=None,  # the operator's trail: the other company is told nothing of this platform
            subject_type="platform_token",
            subject_id=token["id"],
            data={"reason": "company_out_of_scope", "company_id": row["id"], "token_id": token["id"]},
        )
        row = None
    if row is None:
        raise NotFound(f"no company {ref!r} that this platform credential may charge")
    return row


async def _person(company: dict[str, Any], ref: int | str) -> dict[str, Any]:
    where = User.id == ref if isinstance(ref, int) else User.email == ref
    row = await User.select(User.id, User.email).where(where & (User.company == company["id"])).first()
    if row is None:  # another company's person is no person of this one: the same answer as nobody
        raise NotFound(f"no person {ref!r} in {company['name']}")
    return row


def _answer(row: dict[str, Any], company: dict[str, Any], person: dict[str, Any]) -> dict[str, Any]:
    left = round(row["left_after"], 2)
    return {
        "id": row["id"],
        "company_id": company["id"],
        "company": company["name"],
        "user_id": person["id"],
        "email": person["email"],
        "kind": row["kind"],
        "credits": round(row["credits"], 2),
        "idempotency_key": row["idempotency_key"],
        "at": row["at"],
        "remaining": left,
        "used_up": left < credits.BASE_CHARGE,
    }


async def _replay(
    token: dict[str, Any],
    key: str,
    company: dict[str, Any],
    person: dict[str, Any],
    kind: str,
    amount: float,
):
    """This credential's earlier charge under `key` (its answer), None, or 409 when it differs. Another
    credential's charges under the same key are not looked at."""
    row = await PlatformCharge.select().where(PlatformCharge.token_key == token_key(token["id"], key)).first()
    if row is None:
        return None
    same = (row["company"], row["user"], row["kind"]) == (company["id"], person["id"], kind)
    if not same or abs(row["credits"] - amount) > 0.005:  # REAL: single precision on PostgreSQL
        raise Conflict(
            f"idempotency key {key!r} was used for a different charge (charge {row['id']}); "
            "a new charge needs a new key",
            code="idempotency_conflict",
        )
    return _answer(row, company, person)


async def charge(
    token: dict[str, Any], *, company: int | str, user: int | str, kind: str, amount: float, key: str
) -> tuple[dict[str, Any], bool]:
    """(the answer, whether it is a replay). Recorded even over what is left, down to the overdraft bound
    below zero; past it refused (402) and audited; audited with the charge."""
    if not KIND.fullmatch(kind) or kind == credits.RUN:
        raise Invalid("kind: chat_turn or another lower-case name (letters, digits, _), not 'run'")
    if not 0 < amount <= MAX_CREDITS:
        raise Invalid(f"credits: more than 0, at most {MAX_CREDITS:.0f}")
    key = key.strip()
    if not key or len(key) > 200:
        raise Invalid("idempotency_key: 1 to 200 characters")
    amount = round(amount, 2)
    company_row = await _company(token, company)
    person = await _person(company_row, user)
    if (done := await _replay(token, key, company_row, person, kind, amount)) is not None:
        return done, True
    bound = get_settings().platform_overdraft_credits
    try:
        async with audit.atomic():
            await credits.lock_company(company_row["id"])  # the same key twice at once: one waits
            if (done := await _replay(token, key, company_row, person, kind, amount)) is not None:
                return done, True
            total, held, left = await credits.balance(company_row["id"])
            over_bound = left - amount < -bound - 0.005
            data = {
                "kind": kind,
                "credits": amount,
                "idempotency_key": key,
                "token_id": token["id"],
                "pool": total,
                "left_before": left,
            }
            if over_bound:  # the refusal's entry commits; nothing else is written
                await audit.record(
                    "credits.platform_charge_refused",
                    actor=_actor(token),
                    company_id=company_row["id"],
                    subject_type="user",
                    subject_id=person["id"],
                    data={**data, "reason": "overdraft_bound", "overdraft_bound": bound},
                )
            else:
                row = PlatformCharge(
                    company=company_row["id"],
                    user=person["id"],
                    kind=kind,
                    credits=amount,
                    idempotency_key=key,
                    token_key=token_key(token["id"], key),
                    token_id=token["id"],
                    left_after=round(left - amount, 2),
                    at=clock.now(),
                )
                await row.save()
                await audit.record(
                    "credits.platform_charged",
                    actor=_actor(token),
                    company_id=company_row["id"],
                    subject_type="user",
                    subject_id=person["id"],
                    data={**data, "over_pool": amount > left},
                )
    except (Conflict, Invalid, NotFound):
        raise
    except Exception:  # the same key landed meanwhile (another process): its answer, or 409
        if (done := await _replay(token, key, company_row, person, kind, amount)) is not None:
            return done, True
        raise
    if over_bound:
        raise PaymentRequired(
            f"this charge of {amount:.2f} credits would leave {company_row['name']}'s pool at "
            f"{left - amount:.2f}, more than the {bound:.2f} below zero that platform charges may take it "
            f"to ({left:.2f} of {total} left); nothing was charged. The pool fills again when the next "
            "period starts, or the operator can top it up",
            code="overdraft_bound",
        )
    observe.count_charge(
        "platform", amount
    )  # one label for every platform kind: they are the platform's names
    stored = await PlatformCharge.select().where(PlatformCharge.id == row.id).first()
    return _answer(stored, company_row, person), False
