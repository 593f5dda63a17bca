"""Per-company OpenID Connect sign-in (issue 53): the authorization code flow with PKCE, through Authlib.

A company admin names the provider (issuer, client id, client secret) and the e-mail domains it serves. A
person who types an address of a served domain is sent to the provider (`begin`) with a fresh state, nonce
and PKCE verifier, all kept here (`SsoSignIn`, single use, ten minutes); the browser comes back with a code
(`complete`), which is exchanged with the verifier and the client secret, and the ID token is checked: its
signature against the provider's published keys (JWKS), its issuer, its audience (this client id), its
expiry and its nonce. Then the address must be one of the company's served domains and belong to a person
of that company who is active; an address nobody has is refused unless the admin turned on just-in-time
membership, when the tenancy package makes the person a member.

The client secret is written and never read back: no answer, log or audit entry carries it
(`SsoSettings.client_secret_set` says only whether one is stored).
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
from datetime import timedelta
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oauth2 import OAuth2Error
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from backend import clock
from backend.audit import service as audit
from backend.errors import Conflict, Forbidden, Invalid, NotAuthenticated, NotFound
from backend.hashing import sha256_text
from backend.settings import get_settings
from backend.tenancy import people, service
from backend.tenancy.context import UserContext
from backend.tenancy.sso_tables import CompanySso, SsoSignIn
from backend.tenancy.tables import Company, User

SIGN_IN_MINUTES = 10  # how long a sign-in sent to the provider may take to come back
SCOPE = "openid email profile"
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
CLOCK_LEEWAY_SECONDS = 60
PROVIDER_TIMEOUT = 10.0
REFUSED = "sso_refused"
_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_LOOPBACK_NAMES = ("localhost",)


def redirect_uri() -> str:
    """Where the provider sends the browser back: the console's own page, fixed by the operator's settings
    (never taken from a request, so a code is never handed to another address)."""
    return get_settings().effective_console_url.rstrip("/") + "/sso/callback"


# --------------------------------------------------------------------------------------------- settings


def domains_of(row: dict[str, Any]) -> list[str]:
    """The served domains as stored (a JSON list; SQLite hands it back as text)."""
    value = row.get("domains") or []
    return list(json.loads(value) if isinstance(value, str) else value)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """A company's SSO settings as any answer shows them: the secret only as whether one is stored."""
    return {
        "issuer": row["issuer"],
        "client_id": row["client_id"],
        "client_secret_set": bool(row.get("client_secret")),
        "domains": domains_of(row),
        "jit_membership": row["jit_membership"],
        "enabled": row["enabled"],
        "redirect_uri": redirect_uri(),
    }


def _require_admin(ctx: UserContext, what: str) -> None:
    ctx.require_person(what)
    if not ctx.is_admin:
        raise Forbidden(f"only a company admin can do this ({what})")


async def _row(company_id: int) -> dict[str, Any] | None:
    return await CompanySso.select().where(CompanySso.company == company_id).first()


async def get_settings_of(ctx: UserContext) -> dict[str, Any] | None:
    """The admin's view of their company's sign-in (None: none configured)."""
    if not ctx.is_admin:
        raise Forbidden("only a company admin can see the company's single sign-on settings")
    row = await _row(ctx.company_id)
    return _public(row) if row else None


def _issuer(value: str) -> str:
    """An https issuer, or http on this machine's loopback (a provider a developer or a test runs here)."""
    issuer = value.strip().rstrip("/")
    parts = urlsplit(issuer)
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise Invalid("issuer must be the provider's https URL, e.g. https://login.example.com")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise Invalid("issuer must use https (plain http only for a provider on this machine's loopback)")
    return issuer


def _loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _domains(values: list[str]) -> list[str]:
    domains = sorted({v.strip().lower().lstrip("@") for v in values if v.strip()})
    if not domains:
        raise Invalid("name at least one e-mail domain the provider serves (e.g. example.com)")
    bad = [d for d in domains if not _DOMAIN.match(d)]
    if bad:
        raise Invalid(f"not an e-mail domain: {', '.join(bad)}")
    return domains


async def _claimed_elsewhere(company_id: int, domains: list[str]) -> list[str]:
    rows = await CompanySso.select(CompanySso.domains).where(CompanySso.company != company_id)
    taken = {d for row in rows for d in domains_of(row)}
    return sorted(set(domains) & taken)


async def configure(ctx: UserContext, changes: dict[str, Any]) -> dict[str, Any]:
    """Creates or changes the company's sign-in; a secret left out keeps the stored one. Audited, without
    the secret (the entry says whether it changed)."""
    _require_admin(ctx, "changing the company's single sign-on")
    before = await _row(ctx.company_id)
    if before is None and not changes.get("client_secret"):
        raise Invalid("a new single sign-on needs the client secret the provider gave you")
    current = (
        {**before, "domains": domains_of(before)} if before else {"jit_membership": False, "enabled": True}
    )
    merged = {**current, **changes}
    for needed in ("issuer", "client_id", "domains"):
        if not merged.get(needed):
            raise Invalid(f"{needed} is required")
    issuer = _issuer(str(merged["issuer"]))
    client_id = str(merged["client_id"]).strip()
    if not client_id:
        raise Invalid("client_id is required")
    domains = _domains(list(merged["domains"]))
    if taken := await _claimed_elsewhere(ctx.company_id, domains):
        raise Conflict(f"another company's single sign-on already serves {', '.join(taken)}")
    values: dict[Any, Any] = {
        CompanySso.issuer: issuer,
        CompanySso.client_id: client_id,
        CompanySso.domains: domains,
        CompanySso.jit_membership: bool(merged["jit_membership"]),
        CompanySso.enabled: bool(merged["enabled"]),
        CompanySso.updated_at: clock.now(),
    }
    secret_changed = bool(changes.get("client_secret"))
    if (
        before is not None
        and not secret_changed
        and (issuer, client_id) != (before["issuer"], before["client_id"])
    ):
        # the stored secret goes only to the provider it was given for: otherwise the next sign-in would send
        # it to whatever token endpoint the new issuer names, a way to read a write-only secret back
        raise Invalid("a new issuer or client ID needs its client secret typed again")
    if secret_changed:
        values[CompanySso.client_secret] = str(changes["client_secret"])
    async with audit.atomic():
        if before is None:
            await CompanySso.insert(
                CompanySso(company=ctx.company_id, **{column._meta.name: v for column, v in values.items()})
            )
        else:
            await CompanySso.update(values).where(CompanySso.company == ctx.company_id)
        after = await _row(ctx.company_id)
        assert after is not None
        shown = _public(after)
        await audit.record(
            "sso.configured",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="company",
            subject_id=ctx.company_id,
            data={
                **{k: shown[k] for k in ("issuer", "client_id", "domains", "jit_membership", "enabled")},
                "client_secret": "changed" if secret_changed else "unchanged",
                "created": before is None,
                **ctx.via(),
            },
        )
    return shown


async def remove(ctx: UserContext) -> None:
    _require_admin(ctx, "removing the company's single sign-on")
    if await _row(ctx.company_id) is None:
        raise NotFound("this company has no single sign-on")
    async with audit.atomic():
        await CompanySso.delete().where(CompanySso.company == ctx.company_id)
        await SsoSignIn.delete().where(SsoSignIn.company == ctx.company_id)
        await audit.record(
            "sso.removed",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="company",
            subject_id=ctx.company_id,
            data=ctx.via(),
        )


# ---------------------------------------------------------------------------------------------- sign-in


def _domain_of(email: str) -> str:
    return email.strip().lower().rpartition("@")[2]


async def _serving(email: str) -> dict[str, Any] | None:
    """The enabled sign-in that serves this address's domain (a domain is served by one company at most)."""
    domain = _domain_of(email)
    if not domain:
        return None
    for row in await CompanySso.select().where(CompanySso.enabled.eq(True)):
        if domain in domains_of(row):
            return row
    return None


async def offer(email: str) -> dict[str, Any]:
    """What the sign-in page offers for an address: its company's single sign-on, if a company serves its
    domain. Says nothing about the person (an address nobody has gets the same answer as a known one)."""
    row = await _serving(email)
    if row is None:
        return {"available": False, "label": None}
    company = await Company.select(Company.name).where(Company.id == row["company"]).first()
    return {"available": True, "label": f"{company['name'] if company else 'company'} SSO"}


async def _metadata(issuer: str) -> dict[str, Any]:
    """The provider's discovery document; its `issuer` must be the configured one exactly."""
    try:
        async with httpx.AsyncClient(timeout=PROVIDER_TIMEOUT) as http:
            response = await http.get(issuer + "/.well-known/openid-configuration")
            response.raise_for_status()
            metadata = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise NotAuthenticated(f"the sign-in provider cannot be reached ({exc})", code=REFUSED) from exc
    if not isinstance(metadata, dict) or metadata.get("issuer", "").rstrip("/") != issuer:
        raise NotAuthenticated(
            "the sign-in provider names another issuer than the one configured", code=REFUSED
        )
    for needed in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(metadata.get(needed), str):
            raise NotAuthenticated(f"the sign-in provider publishes no {needed}", code=REFUSED)
    return metadata


def _oauth_client(row: dict[str, Any], secret: str | None = None) -> AsyncOAuth2Client:
    return AsyncOAuth2Client(
        client_id=row["client_id"],
        client_secret=secret,
        scope=SCOPE,
        redirect_uri=redirect_uri(),
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_basic",
        timeout=PROVIDER_TIMEOUT,
    )


async def begin(email: str) -> dict[str, Any]:
    """Sends a sign-in to the provider of the address's company: the URL to send the browser to, carrying a
    fresh state, nonce and PKCE challenge (their secrets stay here)."""
    row = await _serving(email)
    if row is None:
        raise Invalid("no company's single sign-on serves this address: sign in with your password")
    metadata = await _metadata(row["issuer"])
    state, nonce, verifier = (secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48))
    now = clock.now()
    await SsoSignIn.delete().where(SsoSignIn.expires_at < now)  # the abandoned ones
    await SsoSignIn.insert(
        SsoSignIn(
            state_hash=sha256_text(state),
            company=row["company"],
            nonce=nonce,
            code_verifier=verifier,
            created_at=now,
            expires_at=now + timedelta(minutes=SIGN_IN_MINUTES),
        )
    )
    async with _oauth_client(row) as client:
        url, _ = client.create_authorization_url(
            metadata["authorization_endpoint"],
            state=state,
            code_verifier=verifier,
            nonce=nonce,
            login_hint=email.strip(),
        )
    return {"authorization_url": url, "state": state}


def state_of(authorization_url: str) -> str | None:
    """The state a `begin` URL carries (the console keeps it in the browser's storage to match on return)."""
    values = parse_qs(urlsplit(authorization_url).query).get("state")
    return values[0] if values else None


async def _take_sign_in(state: str) -> dict[str, Any]:
    """The sign-in this state started, removed in the same statement: a state (and so its code) is used
    once, even by two returns racing each other."""
    rows = await (
        SsoSignIn.delete()
        .where(SsoSignIn.state_hash == sha256_text(state))
        .returning(SsoSignIn.company, SsoSignIn.nonce, SsoSignIn.code_verifier, SsoSignIn.expires_at)
    )
    if not rows:
        raise NotAuthenticated(
            "this sign-in is unknown or was used already: start again from the sign-in page", code=REFUSED
        )
    if rows[0]["expires_at"] < clock.now():
        raise NotAuthenticated("this sign-in took too long: start again from the sign-in page", code=REFUSED)
    return cast(dict[str, Any], rows[0])


async def validate_id_token(
    row: dict[str, Any], metadata: dict[str, Any], id_token: str, nonce: str
) -> dict[str, Any]:
    """The ID token's claims once its signature (the provider's JWKS), issuer, audience, expiry and nonce
    are checked; anything else is refused."""
    try:
        async with httpx.AsyncClient(timeout=PROVIDER_TIMEOUT) as http:
            response = await http.get(metadata["jwks_uri"])
            response.raise_for_status()
            keys = KeySet.import_key_set(response.json())
    except (httpx.HTTPError, ValueError, JoseError) as exc:
        raise NotAuthenticated(f"the provider's signing keys cannot be read ({exc})", code=REFUSED) from exc
    try:
        token = jwt.decode(id_token, keys, algorithms=ALGORITHMS)
        jwt.JWTClaimsRegistry(
            leeway=CLOCK_LEEWAY_SECONDS,
            iss={"essential": True, "value": row["issuer"]},
            aud={"essential": True, "value": row["client_id"]},
            exp={"essential": True},
            iat={"essential": True},
            sub={"essential": True},
            nonce={"essential": True, "value": nonce},
        ).validate(token.claims)
    except (JoseError, ValueError) as exc:
        raise NotAuthenticated(f"the provider's ID token was refused ({exc})", code=REFUSED) from exc
    claims = dict(token.claims)
    audience = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audience) > 1 and claims.get("azp") != row["client_id"]:
        raise NotAuthenticated("the provider's ID token was issued to another party (azp)", code=REFUSED)
    return claims


async def complete(code: str, state: str) -> tuple[str, UserContext]:
    """The browser is back from the provider: a session for the person its ID token names, or a refusal."""
    pending = await _take_sign_in(state)
    row = await CompanySso.select().where(CompanySso.company == pending["company"]).first()
    if row is None or not row["enabled"]:
        raise NotAuthenticated("this company's single sign-on is turned off", code=REFUSED)
    metadata = await _metadata(row["issuer"])
    try:
        async with _oauth_client(row, row["client_secret"]) as client:
            tokens = await client.fetch_token(
                metadata["token_endpoint"],
                grant_type="authorization_code",
                code=code,
                code_verifier=pending["code_verifier"],
            )
    except (OAuthError, OAuth2Error, httpx2.HTTPError, ValueError) as exc:
        raise NotAuthenticated(f"the provider refused the sign-in ({exc})", code=REFUSED) from exc
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str):
        raise NotAuthenticated("the provider answered without an ID token", code=REFUSED)
    claims = await validate_id_token(row, metadata, id_token, pending["nonce"])
    user_id = await _person_for(row, claims)
    token, ctx = await service.open_session(
        user_id, how={"method": "sso", "issuer": row["issuer"], "subject": str(claims["sub"])[:200]}
    )
    return token, ctx


async def _person_for(row: dict[str, Any], claims: dict[str, Any]) -> int:
    """The person of the company this sign-in serves whose address the ID token names."""
    email = str(claims.get("email") or "").strip().lower()
    if not email or "@" not in email:
        raise NotAuthenticated("the provider named no e-mail address (ask for the email scope)", code=REFUSED)
    if claims.get("email_verified") is False:
        raise NotAuthenticated("the provider says this address is not verified", code=REFUSED)
    if _domain_of(email) not in domains_of(row):
        raise NotAuthenticated(
            "this address's domain is not one this company's single sign-on serves", code=REFUSED
        )
    person = await User.select(User.id, User.company, User.active).where(User.email == email).first()
    if person is not None and person["company"] == row["company"] and person["active"]:
        return cast(int, person["id"])
    if person is None and row["jit_membership"]:
        name = str(claims.get("name") or email.partition("@")[0])[:200]
        return await people.admit_member(row["company"], email, name, via=f"sso:{row['issuer']}")
    refusal = (
        "is deactivated" if person is not None and person["company"] == row["company"] else "was not invited"
    )
    raise NotAuthenticated(
        f"{email} {refusal} in this company: ask its admin for an invitation", code=REFUSED
    )
