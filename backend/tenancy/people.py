"""A company's people, run by the people who own it (issue 53): the operator starts a company and its first
admin; its admins invite, deactivate and reactivate people, change roles and send password-reset links; a
person sets their password by a one-time link and changes it signed in.

This package is the only one that writes a person, a password hash or a permission (tests/tenancy/
test_writers.py). Every admin decision here is a person's, in a session (never an assistant token), of an
admin, confined to their own company, and audited with the change in one transaction.

One-time links (`PersonLink`): 32 random bytes shown once (`crl_…`), stored as their SHA-256; single-use, they
expire (invitations after `invite_link_hours`, 72 by default; resets after `reset_link_hours`) and issuing a
new one, or revoking, ends the open ones. Every way a link fails (unknown, used, expired, revoked, its person
deactivated) gets one answer.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from backend import clock
from backend.audit import service as audit
from backend.errors import Conflict, Forbidden, Invalid, NotFound
from backend.hashing import sha256_text
from backend.settings import get_settings
from backend.tenancy import mail, passwords
from backend.tenancy.context import ADMIN, MEMBER, ROLES, SESSION, UserContext
from backend.tenancy.oauth_tables import OAuthGrant
from backend.tenancy.tables import (
    PLANS,
    ApiToken,
    Company,
    PersonLink,
    Session,
    User,
)

if TYPE_CHECKING:
    from piccolo.custom_types import Combinable

LINK_PREFIX = "crl_"
INVITE, RESET = "invite", "reset"
SET_PASSWORD_PATH = "/set-password"  # the console's page a link opens (?token=crl_…)
EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")
LINK_INVALID = (
    "this link is not valid: it was used, it expired or it was revoked; ask your admin for a new one"
)
FORGOT_ANSWER = (
    "if this address belongs to an active account, a link to set a new password is on its way; it is valid "
    "for a short while and only once"
)
PERSON_FIELDS = (User.id, User.email, User.name, User.title, User.role, User.active, User.password_hash)
FORGOT_INTERVAL_SECONDS = 300  # a forgotten-password mail at most this often per person
_pending_mail: set[asyncio.Task[dict[str, Any]]] = set()


# --- small helpers -------------------------------------------------------------------------------------------


def normal_email(email: str) -> str:
    email = (email or "").strip().lower()
    if len(email) > 254 or not EMAIL.match(email):
        raise Invalid(f"{email!r} is not an e-mail address", code="invalid_email")
    return email


def person_view(row: dict[str, Any]) -> dict[str, Any]:
    """A person as admins see them: never their hash; `status` says whether they can sign in."""
    if not row["active"]:
        status = "deactivated"
    elif not row["password_hash"]:
        status = "invited"
    else:
        status = "active"
    return {
        "id": row["id"],
        "email": row["email"],
        "name": row["name"],
        "title": row["title"],
        "role": row["role"],
        "active": row["active"],
        "status": status,
    }


def link_url(token: str) -> str:
    return f"{get_settings().effective_console_url.rstrip('/')}{SET_PASSWORD_PATH}?token={quote(token)}"


def require_admin(ctx: UserContext, what: str) -> None:
    """A person (a session or the operator: never a token), not an auditor, and an admin of their company."""
    ctx.require_person(what)
    if not ctx.is_admin:
        raise Forbidden(f"only a company admin can do this ({what})")


async def _person_in(ctx: UserContext, user_id: int) -> dict[str, Any]:
    """A person of the admin's own company; another company's person and a missing one look the same."""
    row = (
        await User.select(*PERSON_FIELDS)
        .where((User.id == user_id) & (User.company == ctx.company_id))
        .first()
    )
    if row is None:
        raise NotFound(f"no person {user_id} in this company")
    return row


async def _active_admins(company_id: int) -> int:
    """Admins who can act: active, with a password set."""
    return cast(
        int,
        await User.count().where(
            (User.company == company_id)
            & (User.role == ADMIN)
            & (User.active == True)  # noqa: E712
            & (User.password_hash != "")
        ),
    )


async def _refuse_last_admin(ctx: UserContext, person: dict[str, Any], what: str) -> None:
    """The company keeps one admin who can act: the last one is not demoted or deactivated, by themselves or
    by anyone (read inside the change's transaction)."""
    acts = person["role"] == ADMIN and person["active"] and person["password_hash"]
    if acts and await _active_admins(ctx.company_id) <= 1:
        raise Conflict(
            f"the company's last admin cannot be {what}: make another admin first", code="last_admin"
        )


async def end_sessions(user_id: int, *, keep_session_id: int | None = None) -> int:
    """Every session of the person ends now (but `keep_session_id`): their next request is signed out."""
    where: Combinable = Session.user == user_id
    if keep_session_id is not None:
        where = where & (Session.id != keep_session_id)
    ended = cast(int, await Session.count().where(where))
    await Session.delete().where(where)
    return ended


async def revoke_tokens(user_id: int) -> int:
    """Every API token of the person, and every assistant they connected by OAuth, is revoked now (refused at
    its next request, whichever process). Returns how many."""
    where = (ApiToken.user == user_id) & (ApiToken.revoked == False)  # noqa: E712
    revoked = cast(int, await ApiToken.count().where(where))
    await ApiToken.update({ApiToken.revoked: True}).where(where)
    grants = (OAuthGrant.user == user_id) & (OAuthGrant.revoked == False)  # noqa: E712
    revoked += cast(int, await OAuthGrant.count().where(grants))
    await OAuthGrant.update({OAuthGrant.revoked: True, OAuthGrant.revoked_at: clock.now()}).where(grants)
    return revoked


# --- links ---------------------------------------------------------------------------------------------------


async def _close_links(user_id: int, kind: str | None = None) -> int:
    where = (PersonLink.user == user_id) & (PersonLink.used_at.is_null()) & (PersonLink.revoked == False)  # noqa: E712
    if kind:
        where = where & (PersonLink.kind == kind)
    count = cast(int, await PersonLink.count().where(where))
    await PersonLink.update({PersonLink.revoked: True}).where(where)
    return count


async def _new_link(user_id: int, kind: str, *, created_by: str) -> dict[str, Any]:
    """A fresh link of `kind` for the person; the open ones of the same kind end. Call inside audit.atomic()."""
    await _close_links(user_id, kind)
    settings = get_settings()
    hours = settings.invite_link_hours if kind == INVITE else settings.reset_link_hours
    token = LINK_PREFIX + secrets.token_urlsafe(32)
    row = PersonLink(
        user=user_id,
        kind=kind,
        token_hash=sha256_text(token),
        created_by=created_by[:300],
        created_at=clock.now(),
        expires_at=clock.now() + timedelta(hours=hours),
    )
    await row.save()
    return {"id": row.id, "token": token, "url": link_url(token), "expires_at": row.expires_at}


def _mail_text(kind: str, company: str, url: str, expires_at: Any) -> tuple[str, str]:
    when = expires_at.strftime("%Y-%m-%d %H:%M UTC")
    if kind == INVITE:
        return (
            f"You are invited to {company} on Cleanroom",
            f"You were invited to {company} on Cleanroom.\n\nSet your password here (once, until {when}):\n"
            f"{url}\n\nIf you did not expect this, ignore this mail.\n",
        )
    return (
        "Set a new Cleanroom password",
        f"Someone asked for a new password for your Cleanroom account at {company}.\n\nSet it here (once, until "
        f"{when}):\n{url}\n\nIf it was not you, ignore this mail: your password stays as it is.\n",
    )


async def _deliver(email: str, kind: str, company: str, link: dict[str, Any]) -> dict[str, Any]:
    """Mail the link when SMTP is set; otherwise hand it back once for the admin or operator to pass on."""
    subject, body = _mail_text(kind, company, link["url"], link["expires_at"])
    mailed = await mail.send(email, subject, body)
    return {
        "email": email,
        "kind": kind,
        "expires_at": link["expires_at"],
        "mailed": mailed,
        "link": None if mailed else link["url"],
    }


async def mail_settled() -> None:
    """Wait for the mails sent in the background (a forgotten-password answer does not wait for its mail)."""
    while _pending_mail:
        await asyncio.gather(*list(_pending_mail), return_exceptions=True)


# --- the operator --------------------------------------------------------------------------------------------


async def any_company() -> bool:
    """Whether any company exists: what an empty database's sign-in page and `serve` say, and nothing else."""
    return await Company.exists()


async def create_company(
    name: str,
    admin_email: str,
    *,
    admin_name: str = "",
    plan: str = "team",
    credit_pool: int | None = None,
    actor: str,
) -> dict[str, Any]:
    """The operator starts a company and its first admin, who sets a password by a one-time link (mailed when
    SMTP is set, otherwise returned for the operator to pass on). Audited."""
    name = (name or "").strip()
    if not name or len(name) > 200:
        raise Invalid("a company needs a name of 1 to 200 characters")
    email = normal_email(admin_email)
    if await Company.exists().where(Company.name == name):
        raise Conflict(f"a company named {name!r} exists already", code="company_exists")
    if await User.exists().where(User.email == email):
        raise Conflict(
            f"{email} has an account already; give the company another first admin", code="email_taken"
        )
    pool = credit_pool if credit_pool is not None else PLANS.get(plan, PLANS["team"])
    async with audit.atomic():
        company = Company(name=name, plan=plan, credit_pool=pool, created_at=clock.now())
        await company.save()
        admin = User(
            company=company.id,
            email=email,
            name=(admin_name or email.partition("@")[0]).strip()[:200],
            password_hash="",
            role=ADMIN,
            created_at=clock.now(),
        )
        await admin.save()
        link = await _new_link(admin.id, INVITE, created_by=actor)
        await audit.record(
            "company.created",
            actor=actor,
            company_id=company.id,
            subject_type="company",
            subject_id=company.id,
            data={"name": name, "plan": plan, "credit_pool": pool, "admin": email},
        )
        await audit.record(
            "user.invited",
            actor=actor,
            company_id=company.id,
            subject_type="user",
            subject_id=admin.id,
            data={
                "email": email,
                "role": ADMIN,
                "link_id": link["id"],
                "expires_at": link["expires_at"].isoformat(),
            },
        )
    delivered = await _deliver(email, INVITE, name, link)
    return {"company": await company_summary(company.id), "admin_id": admin.id, "invitation": delivered}


async def company_summary(company_id: int) -> dict[str, Any]:
    row = (
        await Company.select(
            Company.id, Company.name, Company.plan, Company.credit_pool, Company.created_at, Company.demo
        )
        .where(Company.id == company_id)
        .first()
    )
    if row is None:
        raise NotFound(f"no company {company_id}")
    people = await User.select(User.role, User.active, User.password_hash).where(User.company == company_id)
    row["people"] = len(people)
    row["active_admins"] = sum(1 for p in people if p["role"] == ADMIN and p["active"] and p["password_hash"])
    return row


async def list_companies() -> list[dict[str, Any]]:
    ids = await Company.select(Company.id).order_by(Company.id)
    return [await company_summary(row["id"]) for row in ids]


async def company_by_ref(ref: str | int) -> dict[str, Any]:
    text = str(ref).strip()
    where = Company.id == int(text) if text.isdigit() else Company.name == text
    row = await Company.select(Company.id).where(where).first()
    if row is None:
        raise NotFound(f"no company {ref!r}")
    return row


async def show_company(ref: str | int) -> dict[str, Any]:
    """The company and its people (no hashes): the operator's view."""
    company_id = (await company_by_ref(ref))["id"]
    summary = await company_summary(company_id)
    rows = await User.select(*PERSON_FIELDS).where(User.company == company_id).order_by(User.email)
    return {**summary, "members": [person_view(r) for r in rows]}


async def operator_admin(company_ref: str | int, email: str, *, actor: str) -> dict[str, Any]:
    """The operator gives a company an admin again (its admins all left, or locked themselves out): a person
    of that company is made an active admin with a fresh link to set a password; a new address is invited
    as one. Another company's person is refused. Audited in the company's trail, naming the operator."""
    company_id = (await company_by_ref(company_ref))["id"]
    company = await Company.select(Company.name).where(Company.id == company_id).first()
    email = normal_email(email)
    person = await User.select(*PERSON_FIELDS, User.company).where(User.email == email).first()
    if person is not None and person["company"] != company_id:
        raise Conflict(f"{email} has an account in another company", code="email_taken")
    async with audit.atomic():
        if person is None:
            row = User(
                company=company_id,
                email=email,
                name=email.partition("@")[0],
                password_hash="",
                role=ADMIN,
                created_at=clock.now(),
            )
            await row.save()
            user_id, before = row.id, None
        else:
            user_id, before = person["id"], {"role": person["role"], "active": person["active"]}
            await User.update({User.role: ADMIN, User.active: True}).where(User.id == user_id)
            await revoke_tokens(user_id)
        kind = RESET if person is not None and person["password_hash"] else INVITE
        link = await _new_link(user_id, kind, created_by=actor)
        await audit.record(
            "user.made_admin_by_operator",
            actor=actor,
            company_id=company_id,
            subject_type="user",
            subject_id=user_id,
            data={"email": email, "before": before, "link_id": link["id"]},
        )
    return await _deliver(email, kind, company["name"] if company else "", link)


# --- admins: people ------------------------------------------------------------------------------------------


async def list_people(ctx: UserContext) -> list[dict[str, Any]]:
    """The company's people with their status (active, invited, deactivated): its admins and auditors."""
    if not ctx.sees_company_history:
        raise Forbidden("only a company admin or an auditor can list the company's people")
    rows = await User.select(*PERSON_FIELDS).where(User.company == ctx.company_id).order_by(User.email)
    return [person_view(r) for r in rows]


async def invite(ctx: UserContext, email: str, *, name: str = "", role: str = MEMBER) -> dict[str, Any]:
    """An admin invites a person by e-mail. The answer has one shape whether the address is new or has an
    account in another company (which this admin must not learn): for the latter no person is made, and the
    link handed back (no SMTP) or the mail sent (SMTP: a note to the address instead) leads nowhere."""
    require_admin(ctx, "inviting a person")
    email = normal_email(email)
    if role not in ROLES:
        raise Invalid(f"role must be one of {list(ROLES)}")
    existing = await User.select(User.id, User.company).where(User.email == email).first()
    company = ctx.company or {"name": ""}
    if existing is not None and existing["company"] == ctx.company_id:
        raise Conflict(
            f"{email} is in this company already: resend their invitation or reactivate them",
            code="already_member",
        )
    if existing is not None:  # another company's person: the same answer, nothing made, nothing usable sent
        await audit.record(  # the operator's trail, not the company's: its admins must not read it there
            "user.invite_elsewhere",
            actor=ctx.actor,
            company_id=None,
            subject_type="user",
            subject_id="",
            data={"email_sha256": sha256_text(email), "by_company": ctx.company_id, **ctx.via()},
        )
        decoy = LINK_PREFIX + secrets.token_urlsafe(32)  # never stored: it opens the "not valid" answer
        expires_at = clock.now() + timedelta(hours=get_settings().invite_link_hours)
        mailed = False
        if mail.configured():
            mailed = await mail.send(
                email,
                f"An invitation to {company['name']} on Cleanroom",
                f"An admin of {company['name']} tried to invite this address to Cleanroom, but it already has "
                "an account in another company. Nothing changed; tell them to use another address.\n",
            )
        return {
            "email": email,
            "kind": INVITE,
            "expires_at": expires_at,
            "mailed": mailed,
            "link": None if mailed else link_url(decoy),
        }
    async with audit.atomic():
        person = User(
            company=ctx.company_id,
            email=email,
            name=(name or email.partition("@")[0]).strip()[:200],
            password_hash="",
            role=role,
            created_at=clock.now(),
        )
        await person.save()
        link = await _new_link(person.id, INVITE, created_by=ctx.actor)
        await audit.record(
            "user.invited",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=person.id,
            data={
                "email": email,
                "role": role,
                "link_id": link["id"],
                "expires_at": link["expires_at"].isoformat(),
                **ctx.via(),
            },
        )
    return await _deliver(email, INVITE, company["name"], link)


async def resend_invitation(ctx: UserContext, user_id: int) -> dict[str, Any]:
    """A new invitation link for a person who has not set a password yet; the old link stops working."""
    require_admin(ctx, "resending an invitation")
    person = await _person_in(ctx, user_id)
    if person["password_hash"] or not person["active"]:
        raise Conflict(
            f"{person['email']} has no open invitation (they set a password, or they are deactivated)",
            code="not_invited",
        )
    async with audit.atomic():
        link = await _new_link(user_id, INVITE, created_by=ctx.actor)
        await audit.record(
            "user.invite_resent",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=user_id,
            data={"email": person["email"], "link_id": link["id"], **ctx.via()},
        )
    return await _deliver(person["email"], INVITE, (ctx.company or {"name": ""})["name"], link)


async def revoke_links(ctx: UserContext, user_id: int) -> dict[str, Any]:
    """Every open invitation or reset link of the person stops working now."""
    require_admin(ctx, "revoking a link")
    person = await _person_in(ctx, user_id)
    async with audit.atomic():
        revoked = await _close_links(user_id)
        await audit.record(
            "user.links_revoked",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=user_id,
            data={"email": person["email"], "revoked": revoked, **ctx.via()},
        )
    return {"revoked": revoked}


async def send_reset(ctx: UserContext, user_id: int) -> dict[str, Any]:
    """An admin sends a person of their company a password-reset link (their password works until it is used)."""
    require_admin(ctx, "resetting a password")
    person = await _person_in(ctx, user_id)
    if not person["active"]:
        raise Conflict(f"{person['email']} is deactivated: reactivate them first", code="deactivated")
    kind = RESET if person["password_hash"] else INVITE
    async with audit.atomic():
        link = await _new_link(user_id, kind, created_by=ctx.actor)
        await audit.record(
            "user.reset_sent",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=user_id,
            data={"email": person["email"], "kind": kind, "link_id": link["id"], **ctx.via()},
        )
    return await _deliver(person["email"], kind, (ctx.company or {"name": ""})["name"], link)


async def forgot_password(email: str) -> str:
    """Anyone asks for a reset link for an address. The answer, and the work done before answering, are the
    same for an address with an account and one without: a fresh token and its hash either way, and the mail
    (only for an active person with a password, and only with SMTP) leaves in the background."""
    try:
        email = normal_email(email)
    except Invalid:
        return FORGOT_ANSWER
    row = (
        await User.select(User.id, User.active, User.password_hash, User.company.name)
        .where(User.email == email)
        .first()
    )
    token = LINK_PREFIX + secrets.token_urlsafe(32)
    sha256_text(token)
    if row is None or not row["active"] or not row["password_hash"] or not mail.configured():
        return FORGOT_ANSWER
    recent = clock.now() - timedelta(seconds=FORGOT_INTERVAL_SECONDS)
    if await PersonLink.exists().where(
        (PersonLink.user == row["id"]) & (PersonLink.kind == RESET) & (PersonLink.created_at > recent)
    ):
        return FORGOT_ANSWER  # one mail a few minutes at most: the form cannot be used to flood an inbox
    async with audit.atomic():
        link = await _new_link(row["id"], RESET, created_by="self-service")
        await audit.record(
            "user.reset_requested",
            actor=email,
            company_id=None,
            subject_type="user",
            subject_id=row["id"],
            data={"link_id": link["id"]},
        )
    task = asyncio.create_task(_deliver(email, RESET, row["company.name"], link))
    _pending_mail.add(task)
    task.add_done_callback(_pending_mail.discard)
    return FORGOT_ANSWER


async def _open_link(token: str) -> dict[str, Any]:
    token = (token or "").strip()
    if not token.startswith(LINK_PREFIX) or len(token) > 100:
        raise NotFound(LINK_INVALID, code="link_invalid")
    row = (
        await PersonLink.select(
            PersonLink.id,
            PersonLink.kind,
            PersonLink.user,
            PersonLink.expires_at,
            PersonLink.used_at,
            PersonLink.revoked,
            PersonLink.user.email,
            PersonLink.user.name,
            PersonLink.user.active,
            PersonLink.user.company,
            # a join two links deep: Piccolo types the middle link as `Column | Any`
            cast(Any, PersonLink.user.company).name,
        )
        .where(PersonLink.token_hash == sha256_text(token))
        .first()
    )
    if (
        row is None
        or row["used_at"] is not None
        or row["revoked"]
        or row["expires_at"] <= clock.now()
        or not row["user.active"]
    ):
        raise NotFound(LINK_INVALID, code="link_invalid")
    return row


async def inspect_link(token: str) -> dict[str, Any]:
    """What a link is for (the set-password page shows it): its kind, its person's e-mail and company."""
    row = await _open_link(token)
    return {
        "kind": row["kind"],
        "email": row["user.email"],
        "company": row["user.company.name"],
        "expires_at": row["expires_at"],
    }


async def use_link(token: str, password: str) -> dict[str, Any]:
    """Set the password a link is for: once. Every session the person had ends, and every other open link."""
    row = await _open_link(token)
    passwords.require_policy(password, email=row["user.email"], name=row["user.name"])
    hashed = await asyncio.to_thread(passwords.hash_password, password)
    async with audit.atomic():
        claimed = (
            await PersonLink.update({PersonLink.used_at: clock.now()})
            .where(
                (PersonLink.id == row["id"]) & (PersonLink.used_at.is_null()) & (PersonLink.revoked == False)  # noqa: E712
            )
            .returning(PersonLink.id)
        )
        if not claimed:  # another request used it first
            raise NotFound(LINK_INVALID, code="link_invalid")
        await User.update({User.password_hash: hashed}).where(User.id == row["user"])
        await _close_links(row["user"])
        ended = await end_sessions(row["user"])
        await audit.record(
            "user.password_set",
            actor=row["user.email"],
            company_id=row["user.company"],
            subject_type="user",
            subject_id=row["user"],
            data={"by": row["kind"], "link_id": row["id"], "sessions_ended": ended},
        )
    return {"email": row["user.email"], "kind": row["kind"]}


async def change_own_password(ctx: UserContext, old: str, new: str) -> dict[str, Any]:
    """A signed-in person changes their password: the old one is required; every other session ends."""
    from backend.tenancy import login_limits

    if ctx.auth != SESSION:  # an auditor too changes their own: it decides nothing of the company's
        raise Forbidden("change your password signed in to the console", code="person_required")
    # guesses of the current password are counted as sign-ins are (per person and session): a session left
    # open cannot be used to find it out at argon2's speed
    attempt = await login_limits.admit(ctx.email, f"session:{ctx.session_id}")
    row = await User.select(User.password_hash).where(User.id == ctx.user_id).first()
    stored = (row or {}).get("password_hash") or passwords.dummy_hash()
    if not await login_limits.check_password(passwords.hasher(), stored, old, attempt):
        raise Forbidden("the current password is not correct", code="invalid_credentials")
    await login_limits.succeeded(attempt.id)
    passwords.require_policy(new, email=ctx.email, name=ctx.name)
    hashed = await asyncio.to_thread(passwords.hash_password, new)
    async with audit.atomic():
        await User.update({User.password_hash: hashed}).where(User.id == ctx.user_id)
        ended = await end_sessions(ctx.user_id, keep_session_id=ctx.session_id)
        await _close_links(ctx.user_id, RESET)
        await audit.record(
            "user.password_changed",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=ctx.user_id,
            data={"other_sessions_ended": ended, **ctx.via()},
        )
    return {"other_sessions_ended": ended}


async def set_active(ctx: UserContext, user_id: int, active: bool) -> dict[str, Any]:
    """Deactivate (every session ends, every API token is revoked, open links end; runs stay in the record) or
    reactivate (they sign in with their password again; their tokens stay revoked). The last active admin
    cannot be deactivated."""
    require_admin(ctx, "deactivating a person" if not active else "reactivating a person")
    person = await _person_in(ctx, user_id)
    if person["active"] == active:
        return person_view(person)
    ended = revoked = 0
    async with audit.atomic():
        if not active:
            await _refuse_last_admin(ctx, person, "deactivated")
            ended = await end_sessions(user_id)
            revoked = await revoke_tokens(user_id)
            await _close_links(user_id)
        await User.update({User.active: active}).where(User.id == user_id)
        await audit.record(
            "user.reactivated" if active else "user.deactivated",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=user_id,
            data={"email": person["email"], "sessions_ended": ended, "tokens_revoked": revoked, **ctx.via()},
        )
    return person_view({**person, "active": active})


async def set_role(ctx: UserContext, user_id: int, role: str) -> dict[str, Any]:
    """An admin sets a person's role (member, admin, auditor); the company keeps at least one active admin.
    A role change revokes the person's API tokens (an assistant token made as a member must not read as an
    auditor or an admin: review D-L2); their sessions go on, read afresh at each request."""
    require_admin(ctx, "changing a person's role")
    if role not in ROLES:
        raise Invalid(f"role must be one of {list(ROLES)}")
    person = await _person_in(ctx, user_id)
    if person["role"] == role:
        return person_view(person)
    async with audit.atomic():
        if role != ADMIN:
            await _refuse_last_admin(ctx, person, "demoted")
        await User.update({User.role: role}).where(User.id == user_id)
        revoked = await revoke_tokens(user_id)
        await audit.record(
            "user.role_changed",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=user_id,
            data={
                "email": person["email"],
                "from": person["role"],
                "to": role,
                "tokens_revoked": revoked,
                **ctx.via(),
            },
        )
    return person_view({**person, "role": role})


async def admit_member(company_id: int, email: str, name: str, *, via: str) -> int:
    """Just-in-time membership (a company's single sign-on turned it on, tenancy/sso.py): an address of a
    domain the company's provider serves, which the provider has just vouched for, joins as a member. No
    password (they sign in through their provider, or set one by a reset link); audited. Returns their id."""
    email = normal_email(email)
    async with audit.atomic():
        person = User(
            company=company_id,
            email=email,
            name=(name or email.partition("@")[0]).strip()[:200],
            password_hash="",
            role=MEMBER,
            created_at=clock.now(),
        )
        await person.save()
        await audit.record(
            "user.created",
            actor=via,
            company_id=company_id,
            subject_type="user",
            subject_id=person.id,
            data={"email": email, "role": MEMBER, "how": "just-in-time membership", "via": via},
        )
    return person.id


# --- the demo and the tests' fixtures -------------------------------------------------------------------------


async def add_seeded_person(
    company_id: int, email: str, name: str, title: str, role: str, password_hash: str, created_at: Any
) -> int:
    """A person the demo seed makes with a password already hashed (the demo's); only a demo company's."""
    company = await Company.select(Company.demo).where(Company.id == company_id).first()
    if not company or not company["demo"]:
        raise Forbidden("people with a preset password are for demo companies only (`cleanroom demo seed`)")
    row = User(
        company=company_id,
        email=normal_email(email),
        name=name,
        title=title,
        password_hash=password_hash,
        role=role,
        created_at=created_at,
    )
    await row.save()
    return row.id
