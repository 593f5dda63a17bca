"""OAuth 2.1 for remote assistants (backend/tenancy/oauth.py): the assistants that registered themselves, the
authorization requests waiting for a person's consent, each consent (a grant) and its hashed credentials."""

from __future__ import annotations

from piccolo.columns import JSON, Boolean, ForeignKey, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import User


class OAuthClient(Table, tablename="oauth_client"):
    """An assistant that registered itself (RFC 7591). Every one is a public client: it proves itself with PKCE
    at each authorization, never with a secret (none is issued, none is stored)."""

    client_id = Varchar(length=64, unique=True, index=True)
    client_name = Varchar(length=200, default="")
    info = JSON(default={})  # the registered metadata as the registration answered it
    created_at = Timestamptz()
    # the sha256 of the address bucket it registered from (tenancy/oauth.py registration_refused): registrations
    # are counted per address, and the address itself is not kept
    registered_from = Varchar(length=64, default="", index=True)


class OAuthRequest(Table, tablename="oauth_request"):
    """An authorization request waiting for a signed-in person's consent (the console's consent page): short-lived,
    used once. Only the hash of its id (the console link's secret) is stored."""

    request_hash = Varchar(length=64, unique=True, index=True)
    client_id = Varchar(length=64)
    params = JSON(default={})  # redirect_uri, its being explicit, state, code_challenge, scopes, resource
    created_at = Timestamptz()
    expires_at = Timestamptz()
    used_at = Timestamptz(null=True, default=None)


class OAuthGrant(Table, tablename="oauth_grant"):
    """One person's consent to one assistant: its tokens act as that person's assistant (the assistant scope,
    within their company), until the person revokes it on the console's Assistant access page."""

    user = ForeignKey(references=User, null=False, index=True)
    client_id = Varchar(length=64)
    client_name = Varchar(length=200, default="")
    redirect_uri = Varchar(length=2000, default="")
    scope = Varchar(length=20, default="assistant")
    resource = Varchar(length=2000, default="")
    created_at = Timestamptz()
    last_used_at = Timestamptz(null=True, default=None)
    revoked = Boolean(default=False)
    revoked_at = Timestamptz(null=True, default=None)


class OAuthToken(Table, tablename="oauth_token"):
    """A grant's credentials, by their hash only: its authorization code (used once), its access tokens (an hour)
    and its refresh tokens (each used once: a refresh token presented again revokes the grant)."""

    grant = ForeignKey(references=OAuthGrant, null=False, index=True)
    kind = Varchar(length=10)  # code | access | refresh
    token_hash = Varchar(length=64, unique=True, index=True)
    data = JSON(default={})  # a code's challenge and redirect_uri
    created_at = Timestamptz()
    expires_at = Timestamptz()
    used_at = Timestamptz(null=True, default=None)  # a code exchanged, a refresh token rotated


TABLES = [OAuthClient, OAuthRequest, OAuthGrant, OAuthToken]
