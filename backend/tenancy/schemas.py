"""What the identity, token and company endpoints accept and return."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class LoginBody(BaseModel):
    email: str = Field(min_length=3, max_length=254)
    password: str = Field(min_length=1, max_length=1000)


class TokenBody(BaseModel):
    name: str = Field(min_length=1, max_length=100)


class SettingsBody(BaseModel):
    code_execution_enabled: bool | None = None
    assistant_write_enabled: bool | None = None
    followup_without_reapproval: bool | None = None
    followup_grant_hours: int | None = Field(default=None, ge=1, le=168)
    followup_grant_max_runs: int | None = Field(default=None, ge=1, le=100)
    flow_action_cap: int | None = Field(default=None, ge=1, le=500)
    drive_quota_mb_per_user: int | None = Field(default=None, ge=1, le=102_400)
    drive_quota_mb_per_company: int | None = Field(default=None, ge=1, le=1_048_576)
    drive_uploads_per_hour: int | None = Field(default=None, ge=1, le=10_000)
    evidence_retention_days: int | None = Field(default=None, ge=0, le=365)
    credit_limit_per_person: int | None = Field(default=None, ge=0)  # within the pool; 0: no limit
    credit_limit_per_day: int | None = Field(default=None, ge=0)
    credit_pool: int | None = None  # the operator's: a company admin asking to change it gets 403 (audited)
    plan: str | None = None  # the operator's, likewise


class Person(BaseModel):
    id: int
    email: str
    name: str
    title: str
    role: str  # admin | member | auditor
    active: bool


class CompanyRef(BaseModel):
    id: int
    name: str
    plan: str


class Me(BaseModel):
    id: int
    email: str
    name: str
    role: str
    company: CompanyRef
    permissions: dict[str, Literal["read", "edit"]]  # dataset -> access; datasets without access are absent
    team_ids: list[int]
    managed_team_ids: list[int]
    auth: str  # session (a person) | token (the assistant)
    token_scope: str | None


class LoginResult(BaseModel):
    user: Me  # the session secret travels only in the HttpOnly cookie


class ForwardingCheck(BaseModel):
    signed: bool  # the probe's signature is made with this API's forwarding key


class SignedOut(BaseModel):
    status: Literal["signed out"] = "signed out"


class ApiToken(BaseModel):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool
    scope: str


class NewApiToken(BaseModel):
    id: int
    name: str
    prefix: str
    scope: str
    token: str  # shown once; only its hash is stored


class ConnectionRequest(BaseModel):
    """An assistant asking to connect by OAuth, as the console's consent page shows it."""

    client_id: str
    client_name: str = Field(description="the name the assistant registered with (its own claim)")
    redirect_uri: str = Field(description="where the person's browser and the code go if they allow it")
    scope: str = Field(description="always `assistant`: read, upload, propose, never decide")
    expires_at: datetime


class ConnectionAnswerBody(BaseModel):
    allow: bool


class ConnectionAnswer(BaseModel):
    redirect_to: str = Field(description="the assistant's redirect URI, with a code or with access_denied")


class Connection(BaseModel):
    """An assistant the person connected by OAuth (one grant): revoked, its tokens stop at their next request."""

    id: int
    client_id: str
    client_name: str
    redirect_uri: str
    scope: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


class CompanySettings(BaseModel):
    name: str
    plan: str
    code_execution_enabled: bool
    assistant_write_enabled: bool
    followup_without_reapproval: bool
    followup_grant_hours: int
    followup_grant_max_runs: int
    flow_action_cap: int = 20  # action items one flow may propose across its steps
    drive_quota_mb_per_user: int = 2048  # Drive bytes one person's files may add up to, in MB
    drive_quota_mb_per_company: int = 20480  # Drive bytes the company's files may add up to, in MB
    drive_uploads_per_hour: int = 200  # files one person may upload in an hour
    # data retention: days a run's approved bundle is kept after it ran, so that an admin or auditor can re-run
    # it for evidence; 0 (the default): bundles go when their run ends
    evidence_retention_days: int = 0
    credit_pool: int  # the plan's monthly credits (the operator's; top-ups show in GET /api/credits)
    credit_limit_per_person: int = 0  # the admin's limits within the pool; 0: none
    credit_limit_per_day: int = 0


# --- issue 53: companies, people, teams and dataset permissions ------------------------------------------------


class SetupState(BaseModel):
    has_company: bool  # false on an empty database: the operator starts one (`cleanroom companies create`)


class PersonDetail(BaseModel):
    id: int
    email: str
    name: str
    title: str
    role: str  # admin | member | auditor
    active: bool
    status: Literal["active", "invited", "deactivated"]  # invited: no password set yet


class InviteBody(BaseModel):
    email: str = Field(min_length=3, max_length=254)
    name: str = Field(default="", max_length=200)
    role: Literal["member", "admin", "auditor"] = "member"


class LinkIssued(BaseModel):
    """An invitation or a reset link: mailed when SMTP is set (`mailed`), else `link` is shown this once."""

    email: str
    kind: Literal["invite", "reset"]
    expires_at: datetime
    mailed: bool
    link: str | None  # the URL to pass on; None when it was mailed


class LinksRevoked(BaseModel):
    revoked: int


class RoleChangeBody(BaseModel):
    role: Literal["member", "admin", "auditor"]


class ActiveBody(BaseModel):
    active: bool


class LinkTokenBody(BaseModel):
    token: str = Field(min_length=1, max_length=200)


class LinkInfo(BaseModel):
    kind: Literal["invite", "reset"]
    email: str
    company: str
    expires_at: datetime


class SetPasswordBody(BaseModel):
    token: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=1000)


class PasswordSet(BaseModel):
    email: str
    kind: Literal["invite", "reset"]


class ForgotBody(BaseModel):
    email: str = Field(min_length=1, max_length=254)


class ForgotAnswer(BaseModel):
    message: str  # the same for every address


class ChangePasswordBody(BaseModel):
    old_password: str = Field(min_length=1, max_length=1000)
    new_password: str = Field(min_length=1, max_length=1000)


class PasswordChanged(BaseModel):
    other_sessions_ended: int


class TeamMember(BaseModel):
    user_id: int
    email: str = ""
    manager: bool = False


class TeamView(BaseModel):
    id: int
    name: str
    members: list[TeamMember]


class TeamBody(BaseModel):
    name: str = Field(min_length=1, max_length=100)


class MemberRef(BaseModel):
    user_id: int
    manager: bool = False


class TeamMembersBody(BaseModel):
    members: list[MemberRef]


class GridTeamRow(BaseModel):
    id: int
    name: str
    grants: dict[str, Literal["read", "edit"]]


class GridPersonRow(BaseModel):
    id: int
    email: str
    name: str
    role: str
    active: bool
    grants: dict[str, Literal["read", "edit"]]  # their own row; their teams' rows add to it


class PermissionGrid(BaseModel):
    datasets: list[str]
    teams: list[GridTeamRow]
    people: list[GridPersonRow]


class GridBody(BaseModel):
    """Rows to replace, whole: team id or person id -> {dataset: read | edit | none}; rows not named stay."""

    teams: dict[int, dict[str, Literal["read", "edit", "none"]]] = Field(default_factory=dict)
    people: dict[int, dict[str, Literal["read", "edit", "none"]]] = Field(default_factory=dict)


class CompanySummary(BaseModel):
    id: int
    name: str
    plan: str
    credit_pool: int
    created_at: datetime
    demo: bool
    people: int
    active_admins: int  # admins who set a password and are active


class CompanyDetail(CompanySummary):
    members: list[PersonDetail]
