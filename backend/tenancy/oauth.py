"""OAuth 2.1 for remote assistants: Cleanroom's own authorization server for its MCP endpoint.

A hosted assistant's connector (OAuth-first, as the MCP authorization specification has it) finds this server from
the MCP endpoint's protected-resource metadata (RFC 9728), registers itself (RFC 7591), and sends the person to the
console's consent page. The person, signed in, sees which assistant asks (its name and where the code goes) and
grants it the assistant scope, the one scope there is: what a personal API token may do (read, upload, propose,
revise, ask follow-ups), never a decision. The assistant then trades the code, with its PKCE verifier (S256 only),
for an access token (an hour) and a refresh token (each used once: a refresh token presented a second time revokes
the whole grant, as a code presented twice does).

The protocol's endpoints are the MCP SDK's handlers (`backend/mcp/oauth.py` mounts them) over the provider here
(`AuthorizationServer`, the SDK's `OAuthAuthorizationServerProvider`); the consent and the person's list of
grants are the API's own routes (`tenancy/controller.py`, `OAuthController`). Every credential is stored as its
hash (`backend/hashing.py`). Every client is public: none gets a secret, PKCE proves each authorization.

An access token resolves, wherever it is sent (the MCP endpoint, the API), to its person's context as the
assistant (`auth=TOKEN`, the assistant scope, `grant_id`): inside that person's company only, refused wherever a
person must decide, exactly as a personal token is. A grant, its refresh-token reuse, a replayed code and a
revocation each get an audit entry.
"""

from __future__ import annotations

import secrets
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, cast
from urllib.parse import urlsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull
from mcp.shared.auth import OAuthToken as TokenAnswer
from pydantic import ValidationError

from backend import clock
from backend.audit import service as audit
from backend.errors import NotAuthenticated, NotFound
from backend.hashing import sha256_text
from backend.settings import get_settings
from backend.tenancy.context import (
    TOKEN,
    UserContext,
    connector_actor,
    joined_user_sql,
    load_user_context,
    split_user_row,
)
from backend.tenancy.oauth_tables import OAuthClient, OAuthGrant, OAuthRequest, OAuthToken

SCOPE = "assistant"  # the one scope (tenancy/service.py ASSISTANT_SCOPE): never a decision
ACCESS_PREFIX = "cra_"  # an access token; tenancy/service.py routes a bearer token by it
REFRESH_PREFIX = "crr_"
CODE_PREFIX = "crc_"
ACCESS_TTL = timedelta(hours=1)
REFRESH_TTL = timedelta(days=30)
CODE_TTL = timedelta(minutes=5)
REQUEST_TTL = timedelta(minutes=10)  # how long a consent page stays open
ISSUER_PATH = "/oauth"  # the authorization server's endpoints: /oauth/authorize, /token, /register, /revoke
MCP_PATH = "/mcp"
CONSENT_PATH = "/connect"  # the console's consent page
MAX_REDIRECT_URIS = 10
# registration is open to anyone (RFC 7591: an assistant registers itself before anyone signs in), so it is
# counted per address: at most this many an hour from one address bucket (an IPv4 address, an IPv6 /64)
REGISTRATIONS_PER_HOUR = 10
REGISTRATION_WINDOW = timedelta(hours=1)
# a client that nobody granted anything goes this long after it registered (sweep): a flood of registrations
# that never lead to a consent does not stay in the table
UNUSED_CLIENT_KEPT = timedelta(days=7)
# the address bucket's hash of the registration being served (set by the endpoint, read by register_client)
registering_from: ContextVar[str] = ContextVar("registering_from", default="")
LOOPBACK = ("localhost", "127.0.0.1", "[::1]", "::1")


def issuer_url() -> str:
    return get_settings().effective_public_url.rstrip("/") + ISSUER_PATH


def resource_url() -> str:
    """The MCP endpoint as assistants reach it: the resource every access token is issued for (RFC 8707)."""
    return get_settings().effective_public_url.rstrip("/") + MCP_PATH


def is_access_token(token: str) -> bool:
    return token.startswith(ACCESS_PREFIX)


def _redirect_refused(uri: str) -> str | None:
    """Why a redirect URI may not be registered (OAuth 2.1 section 2.3.1), or None: https, http on this machine
    only (a native app's loopback listener), or a private-use scheme; never one carrying a fragment."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if parts.fragment:
        return f"{uri!r} has a fragment"
    if scheme in ("javascript", "data", "file", "vbscript"):
        return f"{uri!r} is not a place to send a code"
    if scheme == "http" and (parts.hostname or "") not in LOOPBACK:
        return f"{uri!r} is plain http on another host: use https (http only on localhost)"
    if scheme in ("http", "https") and not parts.hostname:
        return f"{uri!r} names no host"
    return None


def _expired(at: datetime | None) -> bool:
    return at is None or at <= clock.now()


class Code(AuthorizationCode):
    grant_id: int
    row_id: int


class Refresh(RefreshToken):
    grant_id: int
    row_id: int


class Access(AccessToken):
    grant_id: int


_TOKEN_COLUMNS = (
    OAuthToken.id,
    OAuthToken.data,
    OAuthToken.expires_at,
    OAuthToken.used_at,
    OAuthToken.grant.id,
    OAuthToken.grant.client_id,
    OAuthToken.grant.revoked,
    OAuthToken.grant.scope,
    OAuthToken.grant.resource,
    cast(Any, OAuthToken.grant.user).id,  # a join two links deep: Piccolo types the middle one `Column | Any`
)


async def _token_row(token: str, kind: str) -> dict[str, Any] | None:
    return (
        await OAuthToken.select(*_TOKEN_COLUMNS)
        .where((OAuthToken.token_hash == sha256_text(token)) & (OAuthToken.kind == kind))
        .output(load_json=True)
        .first()
    )


async def _issue(grant_id: int, scopes: list[str], resource: str | None) -> TokenAnswer:
    """A new access token and refresh token of a grant (only their hashes are kept)."""
    access = ACCESS_PREFIX + secrets.token_urlsafe(32)
    refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
    now = clock.now()
    await OAuthToken.insert(
        OAuthToken(
            grant=grant_id,
            kind="access",
            token_hash=sha256_text(access),
            created_at=now,
            expires_at=now + ACCESS_TTL,
        ),
        OAuthToken(
            grant=grant_id,
            kind="refresh",
            token_hash=sha256_text(refresh),
            created_at=now,
            expires_at=now + REFRESH_TTL,
        ),
    )
    return TokenAnswer(
        access_token=access,
        token_type="Bearer",
        expires_in=int(ACCESS_TTL.total_seconds()),
        scope=" ".join(scopes),
        refresh_token=refresh,
    )


async def _use_once(row_id: int) -> bool:
    """Marks a code or refresh token used; False when it already was (two requests racing with one: one wins)."""
    done = (
        await OAuthToken.update({OAuthToken.used_at: clock.now()})
        .where((OAuthToken.id == row_id) & (OAuthToken.used_at.is_null()))
        .returning(OAuthToken.id)
    )
    return bool(done)


async def _owner(grant_id: int) -> dict[str, Any]:
    row = await (
        OAuthGrant.select(
            OAuthGrant.user.email, OAuthGrant.user.company, OAuthGrant.client_id, OAuthGrant.client_name
        )
        .where(OAuthGrant.id == grant_id)
        .first()
    )
    assert row is not None
    return row


async def revoke_grant_for(grant_id: int, action: str, *, actor: str | None = None, **data: Any) -> bool:
    """Revokes a grant and every token of it, with an audit entry `action` (once: False if it already was)."""
    done = (
        await OAuthGrant.update({OAuthGrant.revoked: True, OAuthGrant.revoked_at: clock.now()})
        .where((OAuthGrant.id == grant_id) & (OAuthGrant.revoked == False))  # noqa: E712 - SQL
        .returning(OAuthGrant.id)
    )
    if not done:
        return False
    owner = await _owner(grant_id)
    await audit.record(
        action,
        actor=actor or connector_actor(owner["user.email"], grant_id),
        company_id=owner["user.company"],
        subject_type="oauth_grant",
        subject_id=grant_id,
        data={"client_id": owner["client_id"], "client_name": owner["client_name"], **data},
    )
    return True


KEPT_AFTER_EXPIRY = timedelta(days=1)


async def sweep(now: datetime) -> None:
    """Forgets what can no longer be used, a day after it expired: consent requests, codes, access and refresh
    tokens (a rotated refresh token is kept until its own expiry: presented again before then, it revokes its
    grant). Run at each new authorization, so the tables stay as small as their use."""
    before = now - KEPT_AFTER_EXPIRY
    await OAuthRequest.delete().where(OAuthRequest.expires_at < before)
    await OAuthToken.delete().where(OAuthToken.expires_at < before)
    granted = {row["client_id"] for row in await OAuthGrant.select(OAuthGrant.client_id).distinct()}
    waiting = {row["client_id"] for row in await OAuthRequest.select(OAuthRequest.client_id).distinct()}
    old = OAuthClient.created_at < now - UNUSED_CLIENT_KEPT
    kept = granted | waiting
    await OAuthClient.delete().where((old & OAuthClient.client_id.not_in(sorted(kept))) if kept else old)


def address_hash(peer: str) -> str:
    """What a registration is counted by: the sha256 of the caller's address bucket (an IPv6 /64 is one)."""
    from backend.tenancy.login_limits import address_bucket

    return sha256_text("oauth-registration " + address_bucket(peer))


async def registration_refused(address: str) -> str | None:
    """Why a registration from this address bucket (`address_hash`) is turned away now, or None."""
    since = clock.now() - REGISTRATION_WINDOW
    recent = await OAuthClient.count().where(
        (OAuthClient.registered_from == address) & (OAuthClient.created_at >= since)
    )
    if recent >= REGISTRATIONS_PER_HOUR:
        return (
            f"{recent} assistants registered from this address in the last hour; the limit is "
            f"{REGISTRATIONS_PER_HOUR} an hour. Register once and keep the client_id"
        )
    return None


class AuthorizationServer:
    """The SDK's `OAuthAuthorizationServerProvider`, on Cleanroom's tables."""

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        row = (
            await OAuthClient.select(OAuthClient.info)
            .where(OAuthClient.client_id == client_id)
            .output(load_json=True)
            .first()
        )
        if row is None:
            return None
        try:
            return OAuthClientInformationFull.model_validate(row["info"])
        except ValidationError:
            return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        uris = [str(u) for u in client_info.redirect_uris or []]
        if not uris or len(uris) > MAX_REDIRECT_URIS:
            raise RegistrationError(
                "invalid_redirect_uri", f"register from 1 to {MAX_REDIRECT_URIS} redirect URIs"
            )
        for uri in uris:
            if why := _redirect_refused(uri):
                raise RegistrationError("invalid_redirect_uri", why)
        # every client is public: no secret is issued (the registration's answer says so), PKCE proves each code
        client_info.token_endpoint_auth_method = "none"
        client_info.client_secret = None
        client_info.client_secret_expires_at = None
        client_info.grant_types = ["authorization_code", "refresh_token"]
        client_info.scope = SCOPE
        name = (client_info.client_name or "").strip()[:200]
        await OAuthClient(
            client_id=client_info.client_id,
            client_name=name,
            info=client_info.model_dump(mode="json", exclude_none=True),
            created_at=clock.now(),
            registered_from=registering_from.get(),
        ).save()

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """The consent page's address: the request waits there for a signed-in person."""
        if set(params.scopes or [SCOPE]) != {SCOPE}:
            raise AuthorizeError("invalid_scope", f"the one scope is {SCOPE!r}")
        if params.resource is not None and params.resource.rstrip("/") != resource_url():
            raise AuthorizeError("invalid_target", f"tokens here are for {resource_url()} only")
        request_id = secrets.token_urlsafe(32)
        now = clock.now()
        await sweep(now)
        await OAuthRequest(
            request_hash=sha256_text(request_id),
            client_id=client.client_id,
            params={
                "redirect_uri": str(params.redirect_uri),
                "explicit": params.redirect_uri_provided_explicitly,
                "state": params.state,
                "code_challenge": params.code_challenge,
                "resource": params.resource,
            },
            created_at=now,
            expires_at=now + REQUEST_TTL,
        ).save()
        console = get_settings().effective_console_url.rstrip("/")
        return f"{console}{CONSENT_PATH}?request_id={request_id}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> Code | None:
        row = await _token_row(authorization_code, "code")
        if row is None or row["grant.client_id"] != client.client_id:
            return None
        if row["used_at"] is not None:  # RFC 6749 4.1.2: a code used twice revokes what it gave
            await revoke_grant_for(row["grant.id"], "oauth.code_replayed")
            return None
        if row["grant.revoked"]:
            return None
        data = row["data"] or {}
        return Code(
            code=authorization_code,
            scopes=[row["grant.scope"]],
            expires_at=row["expires_at"].timestamp(),
            client_id=client.client_id,
            code_challenge=data["code_challenge"],
            redirect_uri=data["redirect_uri"],
            redirect_uri_provided_explicitly=data["explicit"],
            resource=data.get("resource"),
            subject=str(row["grant.user.id"]),
            grant_id=row["grant.id"],
            row_id=row["id"],
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: Code
    ) -> TokenAnswer:
        if not await _use_once(authorization_code.row_id):
            await revoke_grant_for(authorization_code.grant_id, "oauth.code_replayed")
            raise TokenError("invalid_grant", "this authorization code was used already")
        return await _issue(
            authorization_code.grant_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> Refresh | None:
        row = await _token_row(refresh_token, "refresh")
        if row is None or row["grant.client_id"] != client.client_id or row["grant.revoked"]:
            return None
        if row["used_at"] is not None:  # a rotated token presented again: stolen, or the client's copy was
            await revoke_grant_for(row["grant.id"], "oauth.refresh_reused")
            return None
        if _expired(row["expires_at"]):
            return None
        return Refresh(
            token=refresh_token,
            client_id=client.client_id,
            scopes=[row["grant.scope"]],
            expires_at=int(row["expires_at"].timestamp()),
            resource=row["grant.resource"] or None,
            subject=str(row["grant.user.id"]),
            grant_id=row["grant.id"],
            row_id=row["id"],
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: Refresh, scopes: list[str]
    ) -> TokenAnswer:
        if not await _use_once(refresh_token.row_id):
            await revoke_grant_for(refresh_token.grant_id, "oauth.refresh_reused")
            raise TokenError("invalid_grant", "this refresh token was used already")
        return await _issue(refresh_token.grant_id, scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> Access | None:
        row = await _token_row(token, "access")
        if row is None or row["grant.revoked"] or _expired(row["expires_at"]):
            return None
        return Access(
            token=token,
            client_id=row["grant.client_id"],
            scopes=[row["grant.scope"]],
            expires_at=int(row["expires_at"].timestamp()),
            resource=row["grant.resource"] or None,
            subject=str(row["grant.user.id"]),
            grant_id=row["grant.id"],
        )

    async def revoke_token(self, token: Access | Refresh) -> None:
        """The assistant disconnecting itself (RFC 7009): the whole grant goes."""
        await revoke_grant_for(token.grant_id, "oauth.revoked", by="the assistant")


# An access token's look-up, with its grant, its person and their company, in one statement (as a personal token's)
_ACCESS = joined_user_sql(
    'g."id" AS "grant_id", g."revoked" AS "revoked", g."scope" AS "scope", g."last_used_at" AS "last_used_at", '
    't."expires_at" AS "expires_at"',
    '"oauth_token" t JOIN "oauth_grant" g ON g."id" = t."grant" JOIN "app_user" u ON u."id" = g."user"',
    't."token_hash" = {} AND t."kind" = \'access\'',
)


async def user_for_access_token(token: str) -> UserContext:
    """The person whose assistant holds this access token, as that assistant (the assistant scope, in their
    company). Refused once expired (an hour), or once its grant is revoked, at the next request."""
    rows = await OAuthToken.raw(_ACCESS, sha256_text(token))
    row = rows[0] if rows else None
    if not row or row["revoked"] or _expired(row["expires_at"]):
        raise NotAuthenticated(
            "this access token is not valid (expired, revoked or never issued): refresh it, or connect the "
            "assistant again"
        )
    if clock.last_used_is_stale(row["last_used_at"]):
        await OAuthGrant.update({OAuthGrant.last_used_at: clock.now()}).where(
            OAuthGrant.id == row["grant_id"]
        )
    user, company = split_user_row(row)
    return await load_user_context(
        user["id"], user=user, company=company, auth=TOKEN, grant_id=row["grant_id"], token_scope=row["scope"]
    )


# The person's side: the consent page, and their list of grants (the console's Assistant access page)


async def _pending(request_id: str) -> dict[str, Any]:
    row = (
        await OAuthRequest.select()
        .where(OAuthRequest.request_hash == sha256_text(request_id))
        .output(load_json=True)
        .first()
    )
    if row is None or row["used_at"] is not None or _expired(row["expires_at"]):
        raise NotFound(
            "this connection request is not open (used, expired or never made): start connecting from the "
            "assistant again",
            code="oauth_request_invalid",
        )
    client = (
        await OAuthClient.select(OAuthClient.client_name)
        .where(OAuthClient.client_id == row["client_id"])
        .first()
    )
    row["client_name"] = (client or {}).get("client_name") or ""
    return row


async def consent_request(ctx: UserContext, request_id: str) -> dict[str, Any]:
    """What the consent page shows: which assistant asks, where its code would go, for what."""
    row = await _pending(request_id)
    return {
        "client_id": row["client_id"],
        "client_name": row["client_name"],
        "redirect_uri": row["params"]["redirect_uri"],
        "scope": SCOPE,
        "expires_at": row["expires_at"],
    }


async def decide(ctx: UserContext, request_id: str, *, allow: bool) -> str:
    """The person's answer to a connection request: where to send their browser (the assistant's redirect URI,
    with a code, or with `access_denied`). Only a person answers: never a token (the guard refuses it first),
    never an auditor."""
    ctx.require_person("connecting an assistant")
    row = await _pending(request_id)
    params = row["params"]
    claimed = (
        await OAuthRequest.update({OAuthRequest.used_at: clock.now()})
        .where((OAuthRequest.id == row["id"]) & (OAuthRequest.used_at.is_null()))
        .returning(OAuthRequest.id)
    )
    if not claimed:
        raise NotFound("this connection request was answered already", code="oauth_request_invalid")
    described = {
        "client_id": row["client_id"],
        "client_name": row["client_name"],
        "redirect_uri": params["redirect_uri"],
    }
    if not allow:
        await audit.record(
            "oauth.denied",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="user",
            subject_id=ctx.user_id,
            data={**described, **ctx.via()},
        )
        return construct_redirect_uri(
            params["redirect_uri"],
            error="access_denied",
            error_description="the person declined",
            state=params.get("state"),
        )
    code = CODE_PREFIX + secrets.token_urlsafe(32)
    now = clock.now()
    async with audit.atomic():  # the grant, its code and `oauth.granted` land together, or none does
        grant = OAuthGrant(
            user=ctx.user_id,
            client_id=row["client_id"],
            client_name=row["client_name"],
            redirect_uri=params["redirect_uri"],
            scope=SCOPE,
            resource=params.get("resource") or "",
            created_at=now,
        )
        await grant.save()
        await OAuthToken(
            grant=grant.id,
            kind="code",
            token_hash=sha256_text(code),
            data={k: params.get(k) for k in ("code_challenge", "redirect_uri", "explicit", "resource")},
            created_at=now,
            expires_at=now + CODE_TTL,
        ).save()
        await audit.record(
            "oauth.granted",
            actor=ctx.actor,
            company_id=ctx.company_id,
            subject_type="oauth_grant",
            subject_id=grant.id,
            data={**described, "scope": SCOPE, **ctx.via()},
        )
    return construct_redirect_uri(params["redirect_uri"], code=code, state=params.get("state"))


async def list_grants(ctx: UserContext) -> list[dict[str, Any]]:
    return (
        await OAuthGrant.select(
            OAuthGrant.id,
            OAuthGrant.client_id,
            OAuthGrant.client_name,
            OAuthGrant.redirect_uri,
            OAuthGrant.scope,
            OAuthGrant.created_at,
            OAuthGrant.last_used_at,
            OAuthGrant.revoked,
        )
        .where(OAuthGrant.user == ctx.user_id)
        .order_by(OAuthGrant.id, ascending=False)
    )


async def revoke_grant(ctx: UserContext, grant_id: int) -> None:
    """A person disconnects one of their assistants (as they revoke a token: an auditor too; never a token)."""
    if not ctx.is_person:
        ctx.require_person("disconnecting an assistant")
    mine = await OAuthGrant.exists().where((OAuthGrant.id == grant_id) & (OAuthGrant.user == ctx.user_id))
    if not mine:
        raise NotFound(f"you have no connected assistant {grant_id}")
    await revoke_grant_for(grant_id, "oauth.revoked", actor=ctx.actor, **ctx.via())


async def grant_actors(user_id: int, email: str) -> list[str]:
    """How the trail names each connected assistant of a person (the review's search by person)."""
    grants = await OAuthGrant.select(OAuthGrant.id).where(OAuthGrant.user == user_id)
    return [connector_actor(email, g["id"]) for g in grants]
