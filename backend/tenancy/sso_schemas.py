"""What the single sign-on endpoints accept and return (backend/tenancy/sso.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SsoSettings(BaseModel):
    """A company's OpenID Connect sign-in as an admin sees it: never the client secret, only whether one is
    stored. `redirect_uri` is the address to register at the provider."""

    issuer: str
    client_id: str
    client_secret_set: bool
    domains: list[str]
    jit_membership: bool
    enabled: bool
    redirect_uri: str


class SsoSettingsBody(BaseModel):
    """A field left out keeps its value; `client_secret` is required the first time, write-only after."""

    issuer: str | None = Field(default=None, max_length=500)
    client_id: str | None = Field(default=None, max_length=300)
    client_secret: str | None = Field(default=None, min_length=1, max_length=500)
    domains: list[str] | None = Field(default=None, max_length=50)
    jit_membership: bool | None = None
    enabled: bool | None = None


class SsoOffer(BaseModel):
    """Whether a company's single sign-on serves an address's domain, and the button's label."""

    available: bool
    label: str | None = None


class SsoStartBody(BaseModel):
    email: str = Field(min_length=3, max_length=254)


class SsoStart(BaseModel):
    """Where to send the browser; `state` is the one the URL carries (the console keeps it to match)."""

    authorization_url: str
    state: str


class SsoReturnBody(BaseModel):
    """What the provider sent the browser back with."""

    code: str = Field(min_length=1, max_length=4000)
    state: str = Field(min_length=1, max_length=200)
