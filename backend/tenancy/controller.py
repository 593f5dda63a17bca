from __future__ import annotations

import os
from typing import Any

from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.datastructures import Cookie
from litestar.di import Provide

from backend.settings import get_settings
from backend.tenancy import forwarded, service
from backend.tenancy.auth import ASSISTANT_OK, AUDITOR_OK, provide_user
from backend.tenancy.context import UserContext
from backend.tenancy.schemas import (
    ApiToken,
    CompanyRef,
    CompanySettings,
    ForwardingCheck,
    LoginBody,
    LoginResult,
    Me,
    NewApiToken,
    Person,
    RoleBody,
    SettingsBody,
    SignedOut,
    TokenBody,
)


def me_payload(ctx: UserContext, company: dict[str, Any], dataset_names: list[str]) -> Me:
    return Me(
        id=ctx.user_id,
        email=ctx.email,
        name=ctx.name,
        role=ctx.role,
        company=CompanyRef(id=company["id"], name=company["name"], plan=company["plan"]),
        permissions={name: access for name in dataset_names if (access := ctx.access(name))},
        team_ids=sorted(ctx.team_ids),
        managed_team_ids=sorted(ctx.managed_team_ids),
        auth=ctx.auth,
        token_scope=ctx.token_scope,
    )


def company_settings_payload(company: dict[str, Any]) -> CompanySettings:
    names = (
        *service.SETTING_NAMES,
        *service.NUMBER_SETTINGS,
        *service.LIMIT_SETTINGS,
        "credit_pool",
        "plan",
        "name",
    )
    return CompanySettings(**{name: company[name] for name in names})


def _session_cookie(value: str, *, max_age: int) -> Cookie:
    """HttpOnly and SameSite=Strict always; `secure` whenever people reach the API over https."""
    return Cookie(
        key=service.SESSION_COOKIE,
        value=value,
        httponly=True,
        secure=get_settings().cookies_secure,
        samesite="strict",
        max_age=max_age,
        path="/",
    )


class AuthController(Controller):
    path = "/api/auth"
    tags = ["auth"]

    @post("/login", status_code=200, opt=AUDITOR_OK)
    async def login(
        self, request: Request, data: LoginBody, dataset_names: list[str]
    ) -> Response[LoginResult]:
        """The session secret travels only in the HttpOnly cookie, never in the body a script could read.
        Attempts are counted on the browser's address the console forwards (signed), else on the caller's."""
        peer = request.client.host if request.client else ""
        forwarded.warn_unnamed_proxy("api", peer, request.headers, os.environ)
        client_ip = forwarded.client_address(
            peer,
            request.headers.get(forwarded.ADDRESS_HEADER),
            request.headers.get(forwarded.SIGNATURE_HEADER),
            data.email,
        )
        token, ctx = await service.login(data.email, data.password, ip=client_ip)
        company = await service.company_info(ctx.company_id)
        cookie = _session_cookie(token, max_age=get_settings().session_hours * 3600)
        return Response(LoginResult(user=me_payload(ctx, company, dataset_names)), cookies=[cookie])

    @get("/forwarding")
    async def forwarding(self, request: Request) -> ForwardingCheck:
        """The console's probe at start: whether its signature on a forwarded address (`probe_headers`) is
        made with this API's key. Says nothing else; a forged signature cannot come out `signed`."""
        signed = forwarded.verified(
            request.headers.get(forwarded.ADDRESS_HEADER),
            request.headers.get(forwarded.SIGNATURE_HEADER),
            "",
            forwarded.PROBE,
        )
        return ForwardingCheck(signed=signed is not None)

    @post("/logout", status_code=200, dependencies={"user": Provide(provide_user)}, opt=AUDITOR_OK)
    async def logout(self, request: Request, user: UserContext) -> Response[SignedOut]:
        cookie = request.cookies.get(service.SESSION_COOKIE)
        if cookie:
            await service.logout(cookie)
        return Response(SignedOut(), cookies=[_session_cookie("", max_age=0)])


class MeController(Controller):
    path = "/api/me"
    tags = ["identity"]
    dependencies = {"user": Provide(provide_user)}

    @get("/", opt=ASSISTANT_OK)
    async def me(self, user: UserContext, dataset_names: list[str]) -> Me:
        """Who is asking; `dataset_names` is provided by the app (every dataset, from `records`)."""
        return me_payload(user, await service.company_info(user.company_id), dataset_names)

    @get("/tokens")
    async def tokens(self, user: UserContext) -> list[ApiToken]:
        return [ApiToken(**row) for row in await service.list_api_tokens(user)]

    @post("/tokens", status_code=201)
    async def create_token(self, user: UserContext, data: TokenBody) -> NewApiToken:
        return NewApiToken(**await service.create_api_token(user, data.name))

    @delete("/tokens/{token_id:int}", status_code=204)
    async def revoke_token(self, user: UserContext, token_id: int) -> None:
        await service.revoke_api_token(user, token_id)


class CompanyController(Controller):
    path = "/api/company"
    tags = ["company"]
    dependencies = {"user": Provide(provide_user)}

    @get("/settings", opt=ASSISTANT_OK)
    async def get_settings(self, user: UserContext) -> CompanySettings:
        return company_settings_payload(await service.company_info(user.company_id))

    @patch("/settings")
    async def update_settings(self, user: UserContext, data: SettingsBody) -> CompanySettings:
        changes = data.model_dump(exclude_none=True)
        return company_settings_payload(await service.update_company_settings(user, changes))

    @get("/people")
    async def people(self, user: UserContext) -> list[Person]:
        """The company's people and their roles (admins and auditors)."""
        return [Person(**row) for row in await service.list_people(user)]

    @patch("/people/{user_id:int}")
    async def set_role(self, user: UserContext, user_id: int, data: RoleBody) -> Person:
        """A company admin makes a person an auditor (`auditor`) or takes it away (`member`); audited."""
        return Person(**await service.set_role(user, user_id, data.role))
