from __future__ import annotations

import os
from typing import Any

from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.datastructures import Cookie
from litestar.di import Provide

from backend.settings import get_settings
from backend.tenancy import forwarded, grid, oauth, people, service
from backend.tenancy.auth import ASSISTANT_OK, AUDITOR_OK, SELF_AUTHENTICATED, provide_user
from backend.tenancy.context import UserContext
from backend.tenancy.schemas import (
    ApiToken,
    ChangePasswordBody,
    CompanyRef,
    CompanySettings,
    Connection,
    ConnectionAnswer,
    ConnectionAnswerBody,
    ConnectionRequest,
    ForgotAnswer,
    ForgotBody,
    ForwardingCheck,
    GridBody,
    InviteBody,
    LinkInfo,
    LinkIssued,
    LinksRevoked,
    LinkTokenBody,
    LoginBody,
    LoginResult,
    Me,
    NewApiToken,
    PasswordChanged,
    PasswordSet,
    PermissionGrid,
    PersonDetail,
    RoleChangeBody,
    SetPasswordBody,
    SettingsBody,
    SetupState,
    SignedOut,
    TeamBody,
    TeamMembersBody,
    TeamView,
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

    # The three below serve whoever holds a link or knows an address: no session needed. An assistant's token
    # is refused on them as everywhere a person decides (tenancy/auth.py); they change nothing of a company's.

    @post("/forgot-password", status_code=200, opt=AUDITOR_OK)
    async def forgot_password(self, data: ForgotBody) -> ForgotAnswer:
        """Ask for a reset link by e-mail (sent only with SMTP): one answer for every address."""
        return ForgotAnswer(message=await people.forgot_password(data.email))

    @post("/password-link", status_code=200, opt=AUDITOR_OK)
    async def password_link(self, data: LinkTokenBody) -> LinkInfo:
        """What an invitation or reset link is for (404 `link_invalid` for any link that cannot be used)."""
        return LinkInfo(**await people.inspect_link(data.token))

    @post("/set-password", status_code=200, opt=AUDITOR_OK)
    async def set_password(self, data: SetPasswordBody) -> PasswordSet:
        """Set a password by a one-time link (the policy: 12+ characters, not a common one; 400
        `weak_password` says why). Every session the person had ends; they sign in with it next."""
        return PasswordSet(**await people.use_link(data.token, data.password))


class SetupController(Controller):
    path = "/api/setup"
    tags = ["auth"]
    opt = SELF_AUTHENTICATED  # no caller is resolved: it serves the sign-in page before anyone exists

    @get("/")
    async def setup(self) -> SetupState:
        """Whether any company exists yet (the sign-in page says "no company yet"); nothing else."""
        return SetupState(has_company=await people.any_company())


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

    @delete("/tokens/{token_id:int}", status_code=204, opt=AUDITOR_OK)
    async def revoke_token(self, user: UserContext, token_id: int) -> None:
        """Revoke one of your tokens (an auditor too: it takes a credential away, decides nothing)."""
        await service.revoke_api_token(user, token_id)

    # Assistants connected by OAuth (tenancy/oauth.py): the consent page's request and answer, the person's list

    @get("/connect/{request_id:str}")
    async def connection_request(self, user: UserContext, request_id: str) -> ConnectionRequest:
        """Which assistant asks to connect, where its code would go, for what (404 once used or expired)."""
        return ConnectionRequest(**await oauth.consent_request(user, request_id))

    @post("/connect/{request_id:str}", status_code=200)
    async def answer_connection(
        self, user: UserContext, request_id: str, data: ConnectionAnswerBody
    ) -> ConnectionAnswer:
        """Allow (a grant of the assistant scope, audited) or deny: a person's decision, never a token's."""
        return ConnectionAnswer(redirect_to=await oauth.decide(user, request_id, allow=data.allow))

    @get("/connections")
    async def connections(self, user: UserContext) -> list[Connection]:
        return [Connection(**row) for row in await oauth.list_grants(user)]

    @delete("/connections/{grant_id:int}", status_code=204, opt=AUDITOR_OK)
    async def revoke_connection(self, user: UserContext, grant_id: int) -> None:
        """Disconnect an assistant: its access and refresh tokens are refused from their next use (audited)."""
        await oauth.revoke_grant(user, grant_id)

    @post("/password", status_code=200, opt=AUDITOR_OK)
    async def change_password(self, user: UserContext, data: ChangePasswordBody) -> PasswordChanged:
        """Change your own password, signed in: the current one is required; every other session ends."""
        return PasswordChanged(**await people.change_own_password(user, data.old_password, data.new_password))


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
    async def people(self, user: UserContext) -> list[PersonDetail]:
        """The company's people, their roles and status (active, invited, deactivated): admins and auditors."""
        return [PersonDetail(**row) for row in await people.list_people(user)]

    @patch("/people/{user_id:int}")
    async def set_role(self, user: UserContext, user_id: int, data: RoleChangeBody) -> PersonDetail:
        """An admin sets a person's role (member, admin, auditor); the last admin keeps theirs (409
        `last_admin`). The person's API tokens are revoked; audited."""
        return PersonDetail(**await people.set_role(user, user_id, data.role))

    @post("/people/invitations", status_code=201)
    async def invite(self, user: UserContext, data: InviteBody) -> LinkIssued:
        """Invite a person by e-mail: a one-time link (72 h), mailed, or returned once when no SMTP is set."""
        return LinkIssued(**await people.invite(user, data.email, name=data.name, role=data.role))

    @post("/people/{user_id:int}/invitation", status_code=201)
    async def resend_invitation(self, user: UserContext, user_id: int) -> LinkIssued:
        """A new invitation link for someone who has not set a password; the previous one stops working."""
        return LinkIssued(**await people.resend_invitation(user, user_id))

    @delete("/people/{user_id:int}/links", status_code=200)
    async def revoke_links(self, user: UserContext, user_id: int) -> LinksRevoked:
        """Revoke every open invitation or reset link of the person."""
        return LinksRevoked(**await people.revoke_links(user, user_id))

    @post("/people/{user_id:int}/password-reset", status_code=201)
    async def password_reset(self, user: UserContext, user_id: int) -> LinkIssued:
        """Send a person a password-reset link (mailed, or returned once without SMTP)."""
        return LinkIssued(**await people.send_reset(user, user_id))

    @post("/people/{user_id:int}/deactivate", status_code=200)
    async def deactivate(self, user: UserContext, user_id: int) -> PersonDetail:
        """Every session ends and every API token is revoked at once; their runs stay in the record."""
        return PersonDetail(**await people.set_active(user, user_id, False))

    @post("/people/{user_id:int}/reactivate", status_code=200)
    async def reactivate(self, user: UserContext, user_id: int) -> PersonDetail:
        """They sign in with their password again; revoked tokens stay revoked."""
        return PersonDetail(**await people.set_active(user, user_id, True))

    @get("/teams")
    async def teams(self, user: UserContext) -> list[TeamView]:
        return [TeamView(**t) for t in await grid.list_teams(user)]

    @post("/teams", status_code=201)
    async def create_team(self, user: UserContext, data: TeamBody) -> TeamView:
        return TeamView(**await grid.create_team(user, data.name))

    @patch("/teams/{team_id:int}")
    async def rename_team(self, user: UserContext, team_id: int, data: TeamBody) -> TeamView:
        return TeamView(**await grid.rename_team(user, team_id, data.name))

    @delete("/teams/{team_id:int}", status_code=204)
    async def delete_team(self, user: UserContext, team_id: int) -> None:
        await grid.delete_team(user, team_id)

    @put("/teams/{team_id:int}/members")
    async def set_members(self, user: UserContext, team_id: int, data: TeamMembersBody) -> TeamView:
        """Replace the team's members and managers (each a person of this company)."""
        members = [m.model_dump() for m in data.members]
        return TeamView(**await grid.set_members(user, team_id, members))

    @get("/permissions")
    async def permissions(self, user: UserContext, dataset_names: list[str]) -> PermissionGrid:
        """The grid: each team's and each person's own dataset grants (a person holds theirs and their teams')."""
        return PermissionGrid(**await grid.read_grid(user, dataset_names))

    @put("/permissions")
    async def replace_permissions(
        self, user: UserContext, data: GridBody, dataset_names: list[str]
    ) -> PermissionGrid:
        """Replace the rows named (whole); a change takes effect at the next request. Audited."""
        return PermissionGrid(
            **await grid.replace_grid(user, dataset_names, teams=data.teams, people=data.people)
        )
