"""Single sign-on: the sign-in's three steps (open: nobody is signed in yet) and the admin's settings."""

from __future__ import annotations

from litestar import Controller, Response, delete, get, post, put
from litestar.di import Provide

from backend.settings import get_settings
from backend.tenancy import sso
from backend.tenancy.auth import AUDITOR_OK, provide_user
from backend.tenancy.context import UserContext
from backend.tenancy.controller import _session_cookie, me_payload
from backend.tenancy.schemas import LoginResult
from backend.tenancy.service import company_info
from backend.tenancy.sso_schemas import (
    SsoOffer,
    SsoReturnBody,
    SsoSettings,
    SsoSettingsBody,
    SsoStart,
    SsoStartBody,
)


class SsoSignInController(Controller):
    path = "/api/auth/sso"
    tags = ["auth"]

    @get("/")
    async def offer(self, email: str) -> SsoOffer:
        """Whether a company's single sign-on serves this address's domain (the same for any person)."""
        return SsoOffer(**await sso.offer(email))

    @post("/start", status_code=200, opt=AUDITOR_OK)
    async def start(self, data: SsoStartBody) -> SsoStart:
        return SsoStart(**await sso.begin(data.email))

    @post("/return", status_code=200, opt=AUDITOR_OK)
    async def finish(self, data: SsoReturnBody, dataset_names: list[str]) -> Response[LoginResult]:
        """The code and state the provider sent the browser back with: a session, as a password sign-in."""
        token, ctx = await sso.complete(data.code, data.state)
        company = await company_info(ctx.company_id)
        cookie = _session_cookie(token, max_age=get_settings().session_hours * 3600)
        return Response(LoginResult(user=me_payload(ctx, company, dataset_names)), cookies=[cookie])


class SsoSettingsController(Controller):
    path = "/api/company/sso"
    tags = ["company"]
    dependencies = {"user": Provide(provide_user)}

    @get("/")
    async def get_sso(self, user: UserContext) -> SsoSettings | None:
        """The company's single sign-on (null: none); admins only. The secret is never shown."""
        settings = await sso.get_settings_of(user)
        return SsoSettings(**settings) if settings else None

    @put("/")
    async def put_sso(self, user: UserContext, data: SsoSettingsBody) -> SsoSettings:
        return SsoSettings(**await sso.configure(user, data.model_dump(exclude_none=True)))

    @delete("/", status_code=204)
    async def delete_sso(self, user: UserContext) -> None:
        await sso.remove(user)
