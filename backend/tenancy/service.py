"""Identity: passwords, login with rate limiting, sessions, personal API tokens, company settings."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from backend import clock, observe
from backend.audit import service as audit
from backend.errors import Forbidden, Invalid, NotAuthenticated, TooManyRequests
from backend.hashing import sha256_text
from backend.settings import get_settings
from backend.tenancy import login_limits, oauth, passwords, people
from backend.tenancy.context import (
    SESSION,
    TOKEN,
    UserContext,
    joined_user_sql,
    load_user_context,
    split_user_row,
)
from backend.tenancy.tables import ApiToken, Company, Session, User

SETTING_NAMES = ("code_execution_enabled", "assistant_write_enabled", "followup_without_reapproval")
# whole-number settings and their allowed range: how long and how often one approval lets follow-ups through
NUMBER_SETTINGS = {
    "followup_grant_hours": (1, 168),
    "followup_grant_max_runs": (1, 100),
    "flow_action_cap": (1, 500),
    "drive_quota_mb_per_user": (1, 102_400),
    "drive_quota_mb_per_company": (1, 1_048_576),
    "drive_uploads_per_hour": (1, 10_000),
    # data retention: days a run's approved bundle is kept after it ran, for a re-run as evidence; 0: none
    "evidence_retention_days": (0, 365),
}
# The pool is the operator's (`cleanroom plans assign`, `cleanroom credits top-up`): an admin changing it is
# refused (403, audited). An admin's limits within it (0: none): per person a period, for the company a day.
OPERATOR_SETTINGS = ("credit_pool", "plan")
LIMIT_SETTINGS = ("credit_limit_per_person", "credit_limit_per_day")
SESSION_COOKIE = "cleanroom_session"
TOKEN_PREFIX = "crt_"
ASSISTANT_SCOPE = "assistant"  # the one scope issued today: read, upload, propose, revise, follow up


hash_password = (
    passwords.hash_password
)  # the one hasher (tenancy/passwords.py); the demo seed imports it here
WEAK_PASSWORD_HINT = (
    "email or password is not correct (a password shorter than 12 characters or a common one no longer "
    "signs in outside the demo: use 'forgot password' or ask your admin for a reset link)"
)


async def login(email: str, password: str, *, ip: str = "") -> tuple[str, UserContext]:
    """Returns (session token, user). Wrong email and wrong password fail identically. The attempt is
    counted before the password is checked (login_limits), and the check runs off the event loop. A failed
    sign-in is counted for /metrics: `credentials` (wrong, unknown or refused) or `throttled` (429)."""
    try:
        return await _login(email, password, ip=ip)
    except NotAuthenticated:
        observe.FAILED_SIGN_INS.labels("credentials").inc()
        raise
    except TooManyRequests:
        observe.FAILED_SIGN_INS.labels("throttled").inc()
        raise


async def _login(email: str, password: str, *, ip: str) -> tuple[str, UserContext]:
    email = email.strip().lower()
    attempt = await login_limits.admit(email, ip)
    user = (
        await User.select(User.id, User.password_hash, User.active, User.company.demo)
        .where(User.email == email)
        .first()
    )
    # an unknown address, and a person who has not set a password yet, cost the same check as anyone
    stored = (user["password_hash"] if user else "") or passwords.dummy_hash()
    try:
        ok = await login_limits.check_password(passwords.hasher(), stored, password, attempt)
    except TooManyRequests:
        await login_limits.forget(attempt.id)  # turned away before any check: not a failure
        raise
    ok = ok and bool(user and user["active"] and user["password_hash"])
    if not ok or user is None:
        raise NotAuthenticated(WEAK_PASSWORD_HINT, code="invalid_credentials")
    if not user["company.demo"] and not passwords.acceptable(password):
        # the right password, but one the policy refuses (set before it, or by hand): it no longer signs in
        # anywhere but a demo company; the same answer as a wrong one, and its owner sets a new one by a link
        await audit.record(
            "auth.weak_password_refused",
            actor=email,
            company_id=None,
            subject_type="user",
            subject_id=user["id"],
        )
        raise NotAuthenticated(WEAK_PASSWORD_HINT, code="invalid_credentials")
    if passwords.needs_rehash(user["password_hash"]):  # argon2's parameters changed since it was hashed
        rehashed = await asyncio.to_thread(passwords.hash_password, password)
        await User.update({User.password_hash: rehashed}).where(
            (User.id == user["id"]) & (User.password_hash == user["password_hash"])
        )
    await login_limits.succeeded(attempt.id)
    return await open_session(user["id"])


async def open_session(user_id: int, *, how: dict[str, Any] | None = None) -> tuple[str, UserContext]:
    """A new session for an active person who has just proved who they are (a password here, a company's
    single sign-on in tenancy/sso.py); `how` joins the audit entry (the password's sign-in says nothing)."""
    token = secrets.token_urlsafe(32)
    await Session.insert(
        Session(
            token_hash=sha256_text(token),
            user=user_id,
            created_at=clock.now(),
            expires_at=clock.now() + timedelta(hours=get_settings().session_hours),
        )
    )
    ctx = await load_user_context(user_id)
    await audit.record(
        "auth.login",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="user",
        subject_id=ctx.user_id,
        **({"data": how} if how else {}),
    )
    return token, ctx


async def logout(token: str) -> None:
    await Session.delete().where(Session.token_hash == sha256_text(token))


# A session's and a token's look-up, each with its person and their company, in one statement (SQL written once)
_SESSION = joined_user_sql(
    's."id" AS "id", s."expires_at" AS "expires_at"',
    '"login_session" s JOIN "app_user" u ON u."id" = s."user"',
    's."token_hash" = {}',
)
_TOKEN = joined_user_sql(
    't."id" AS "id", t."revoked" AS "revoked", t."scope" AS "scope", t."last_used_at" AS "last_used_at"',
    '"api_token" t JOIN "app_user" u ON u."id" = t."user"',
    't."token_hash" = {}',
)


async def user_for_session(token: str) -> UserContext:
    """The signed-in person of a session cookie, read now with their company (two queries in all)."""
    rows = await Session.raw(_SESSION, sha256_text(token))
    row = rows[0] if rows else None
    if not row or row["expires_at"] < clock.now():
        raise NotAuthenticated("your session has expired; sign in again")
    user, company = split_user_row(row)
    return await load_user_context(user["id"], user=user, company=company, auth=SESSION, session_id=row["id"])


async def user_for_api_token(token: str) -> UserContext:
    """The assistant's token, its person and their company read now (two queries in all, a third when its
    `last_used_at` is due): a revoked token is refused at its next request, whichever process serves it."""
    if oauth.is_access_token(token):  # an assistant connected by OAuth: its grant's person, the same scope
        return await oauth.user_for_access_token(token)
    rows = await ApiToken.raw(_TOKEN, sha256_text(token))
    row = rows[0] if rows else None
    if not row or row["revoked"]:
        raise NotAuthenticated("this API token is not valid (revoked or never issued)")
    if clock.last_used_is_stale(row["last_used_at"]):
        await ApiToken.update({ApiToken.last_used_at: clock.now()}).where(ApiToken.id == row["id"])
    user, company = split_user_row(row)
    return await load_user_context(
        user["id"], user=user, company=company, auth=TOKEN, token_id=row["id"], token_scope=row["scope"]
    )


async def create_api_token(ctx: UserContext, name: str) -> dict[str, Any]:
    """The plain token is returned once; only its hash is stored. Every token has the assistant scope."""
    ctx.require_person("creating an API token")
    if not name.strip():
        raise Invalid("a token needs a name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        user=ctx.user_id,
        name=name.strip()[:100],
        prefix=token[:10],
        token_hash=sha256_text(token),
        created_at=clock.now(),
        scope=ASSISTANT_SCOPE,
    )
    await row.save()
    await audit.record(
        "token.created",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="api_token",
        subject_id=row.id,
        data={"name": row.name, "prefix": row.prefix, "scope": row.scope, **ctx.via()},
    )
    return {"id": row.id, "name": row.name, "prefix": row.prefix, "scope": row.scope, "token": token}


async def list_api_tokens(ctx: UserContext) -> list[dict[str, Any]]:
    return await ApiToken.select(
        ApiToken.id,
        ApiToken.name,
        ApiToken.prefix,
        ApiToken.created_at,
        ApiToken.last_used_at,
        ApiToken.revoked,
        ApiToken.scope,
    ).where(ApiToken.user == ctx.user_id)


async def revoke_api_token(ctx: UserContext, token_id: int) -> None:
    """A person revokes one of their own tokens; an auditor too (review D-L2): revoking decides nothing of
    the company's, it only takes a credential of theirs away. Never a token itself."""
    if not ctx.is_person:
        ctx.require_person("revoking an API token")
    await ApiToken.update({ApiToken.revoked: True}).where(
        (ApiToken.id == token_id) & (ApiToken.user == ctx.user_id)
    )
    await audit.record(
        "token.revoked",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="api_token",
        subject_id=token_id,
        data=ctx.via(),
    )


async def company_info(company_id: int) -> dict[str, Any]:
    row = await Company.select().where(Company.id == company_id).first()
    assert row is not None
    return row


async def update_company_settings(ctx: UserContext, changes: dict[str, Any]) -> dict[str, Any]:
    ctx.require_person("changing company settings")
    if not ctx.is_admin:
        raise Forbidden("only a company admin can change company settings")
    unknown = set(changes) - set(SETTING_NAMES) - set(NUMBER_SETTINGS) - set(LIMIT_SETTINGS)
    if unknown - set(OPERATOR_SETTINGS):
        raise Invalid(
            f"unknown settings: {sorted(unknown)}; valid: {[*SETTING_NAMES, *NUMBER_SETTINGS, *LIMIT_SETTINGS]}"
        )
    before = await company_info(ctx.company_id)
    if unknown:
        await _refuse_pool_change(ctx, {k: changes[k] for k in sorted(unknown)}, before)
    update: dict[Any, Any] = {}
    for name, value in changes.items():
        if name in SETTING_NAMES:
            if not isinstance(value, bool):
                raise Invalid(f"{name} must be true or false")
        elif name in NUMBER_SETTINGS:
            low, high = NUMBER_SETTINGS[name]
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise Invalid(f"{name} must be a whole number from {low} to {high}")
        elif name in LIMIT_SETTINGS:  # within the pool: never more than it
            pool = before["credit_pool"]
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= pool:
                raise Invalid(f"{name} must be a whole number from 0 (no limit) to the pool, {pool}")
        update[getattr(Company, name)] = value
    async with audit.atomic():  # the change and `settings.changed` land together, or neither
        if update:
            await Company.update(update).where(Company.id == ctx.company_id)
        after = await company_info(ctx.company_id)
        diff = {
            k: {"from": before[k], "to": after[k]}
            for k in (*SETTING_NAMES, *NUMBER_SETTINGS, *LIMIT_SETTINGS)
            if before[k] != after[k]
        }
        if diff:
            await audit.record(
                "settings.changed",
                actor=ctx.actor,
                company_id=ctx.company_id,
                subject_type="company",
                subject_id=ctx.company_id,
                data={**diff, **ctx.via()},
            )
    await _cancel_queued_runs(ctx, before, after)
    return after


async def _refuse_pool_change(ctx: UserContext, asked: dict[str, Any], before: dict[str, Any]) -> None:
    """An admin asking to change the pool or the plan: 403, and an audit entry of the refusal."""
    await audit.record(
        "settings.refused",
        actor=ctx.actor,
        company_id=ctx.company_id,
        subject_type="company",
        subject_id=ctx.company_id,
        data={
            "asked": asked,
            "current": {k: before[k] for k in OPERATOR_SETTINGS},
            "reason": "the pool and the plan are the operator's",
            **ctx.via(),
        },
    )
    raise Forbidden(
        f"the credit pool and the plan are the operator's (asked: {sorted(asked)}): the operator puts the "
        "company on a plan and tops its pool up; a company admin may set limits within the pool "
        f"({', '.join(LIMIT_SETTINGS)})",
        code="operator_only",
    )


# a company's people are run in tenancy/people.py; these two names stay for the callers that had them here
list_people = people.list_people
set_role = people.set_role


# What else happens when a switch is turned off. The runs package registers here the cancellation of the
# runs already waiting (tenancy knows nothing of runs); called with (company id, the setting, who).
GateClosed = Callable[[int, str, str], Awaitable[Any]]
_GATE_CLOSED: list[GateClosed] = []


def on_gate_closed(listener: GateClosed) -> GateClosed:
    """Call `listener` whenever a gate is turned off; one added twice is called once."""
    if listener not in _GATE_CLOSED:
        _GATE_CLOSED.append(listener)
    return listener


async def _cancel_queued_runs(ctx: UserContext, before: dict[str, Any], after: dict[str, Any]) -> None:
    """A gate turned off stops the runs already waiting, not only new ones (the worker checks again too)."""
    for setting in ("assistant_write_enabled", "code_execution_enabled"):
        if before[setting] and not after[setting]:
            for listener in _GATE_CLOSED:
                await listener(ctx.company_id, setting, ctx.actor)
            return
