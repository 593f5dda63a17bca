"""The assistant platform charges what already happened (a chat turn, or another kind it names) to the same
pool runs draw on, with an operator-issued credential of its own: not a person, not an assistant.

The credential (`Bearer cpt_…`, `cleanroom platform token create NAME`) is kept only as its hash and reaches
the platform routes (/api/platform/...) alone: a person's session or an assistant's token is refused there
(401), and the platform's credential is refused everywhere else (it is no personal API token: 401).

A charge names its company, its person (of that company), its kind, its credits and an idempotency key. The
same key again is charged once: the first answer comes back unchanged; the same key with anything else
different is 409. A charge over what is left is still recorded (the turn already happened): the pool is then
used up, and runs are refused with a reason that says what used it.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from backend import clock
from backend.audit import service as audit
from backend.credits import service as credits
from backend.credits.tables import PlatformCharge, PlatformToken
from backend.errors import Conflict, Invalid, NotAuthenticated, NotFound
from backend.hashing import sha256_text
from backend.tenancy.tables import Company, User

TOKEN_PREFIX = "cpt_"
KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_CREDITS = 100_000.0  # one charge at most: a typo of the platform's should not empty a year of pools


def actor(token: dict[str, Any]) -> str:
    """How the audit trail names what a platform credential did."""
    return f"platform:{token['name']} (token {token['id']})"


async def create_token(name: str, *, created_by: str) -> dict[str, Any]:
    """A new platform credential; the plain token is returned once, only its hash is kept. Audited."""
    name = name.strip()
    if not name or len(name) > 100:
        raise Invalid("a platform credential needs a name of at most 100 characters")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = PlatformToken(
        name=name,
        prefix=token[:10],
        token_hash=sha256_text(token),
        created_at=clock.now(),
        created_by=created_by,
    )
    async with audit.atomic():
        await row.save()
        await audit.record(
            "platform.token_created",
            actor=created_by,
            company_id=None,
            subject_type="platform_token",
            subject_id=row.id,
            data={"name": name, "prefix": row.prefix},
        )
    return {"id": row.id, "name": name, "prefix": row.prefix, "token": token}


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
    return list(
        await PlatformToken.select(
            PlatformToken.id,
            PlatformToken.name,
            PlatformToken.prefix,
            PlatformToken.created_at,
            PlatformToken.created_by,
            PlatformToken.last_used_at,
            PlatformToken.revoked,
        ).order_by(PlatformToken.id)
    )


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


async def _company(ref: int | str) -> dict[str, Any]:
    where = Company.id == ref if isinstance(ref, int) else Company.name == ref
    row = await Company.select(Company.id, Company.name).where(where).first()
    if row is None:
        raise NotFound(f"no company {ref!r}")
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


async def _replay(key: str, company: dict[str, Any], person: dict[str, Any], kind: str, amount: float):
    row = await PlatformCharge.select().where(PlatformCharge.idempotency_key == key).first()
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
    """(the answer, whether it is a replay). Recorded even over what is left; audited with the charge."""
    if not KIND.fullmatch(kind) or kind == credits.RUN:
        raise Invalid("kind: chat_turn or another lower-case name (letters, digits, _), not 'run'")
    if not 0 < amount <= MAX_CREDITS:
        raise Invalid(f"credits: more than 0, at most {MAX_CREDITS:.0f}")
    key = key.strip()
    if not key or len(key) > 200:
        raise Invalid("idempotency_key: 1 to 200 characters")
    amount = round(amount, 2)
    company_row = await _company(company)
    person = await _person(company_row, user)
    if (done := await _replay(key, company_row, person, kind, amount)) is not None:
        return done, True
    try:
        async with audit.atomic():
            await credits.lock_company(company_row["id"])  # the same key twice at once: one waits
            if (done := await _replay(key, company_row, person, kind, amount)) is not None:
                return done, True
            total, held, left = await credits.balance(company_row["id"])
            row = PlatformCharge(
                company=company_row["id"],
                user=person["id"],
                kind=kind,
                credits=amount,
                idempotency_key=key,
                token_id=token["id"],
                left_after=round(left - amount, 2),
                at=clock.now(),
            )
            await row.save()
            await audit.record(
                "credits.platform_charged",
                actor=actor(token),
                company_id=company_row["id"],
                subject_type="user",
                subject_id=person["id"],
                data={
                    "kind": kind,
                    "credits": amount,
                    "idempotency_key": key,
                    "token_id": token["id"],
                    "pool": total,
                    "left_before": left,
                    "over_pool": amount > left,
                },
            )
    except (Conflict, Invalid, NotFound):
        raise
    except Exception:  # the same key landed meanwhile (another process): its answer, or 409
        if (done := await _replay(key, company_row, person, kind, amount)) is not None:
            return done, True
        raise
    stored = await PlatformCharge.select().where(PlatformCharge.id == row.id).first()
    return _answer(stored, company_row, person), False
