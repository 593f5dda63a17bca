"""A company's OpenID Connect sign-in (backend/tenancy/sso.py): its provider, and the sign-ins under way."""

from __future__ import annotations

from piccolo.columns import JSON, Boolean, ForeignKey, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company


class CompanySso(Table):
    """One provider per company. `client_secret` is written, never read back by any API (secret=True keeps it
    out of `select(exclude_secrets=True)`; the service reads it only to exchange a code)."""

    company = ForeignKey(references=Company, null=False, unique=True)
    issuer = Varchar(length=500)
    client_id = Varchar(length=300)
    client_secret = Varchar(length=500, secret=True)
    domains = JSON(default=[])  # the e-mail domains it serves, lower case; a domain belongs to one company
    jit_membership = Boolean(default=False)  # an unknown address of a served domain becomes a member
    enabled = Boolean(default=True)
    updated_at = Timestamptz()


class SsoSignIn(Table):
    """A sign-in sent to the provider and not yet back: single use (deleted when the browser returns) and
    short-lived. Only the state's hash is stored; the nonce and the PKCE verifier never leave the server."""

    state_hash = Varchar(length=64, unique=True, index=True)
    company = ForeignKey(references=Company, null=False)
    nonce = Varchar(length=100)
    code_verifier = Varchar(length=200, secret=True)
    created_at = Timestamptz()
    expires_at = Timestamptz()


TABLES = [CompanySso, SsoSignIn]
