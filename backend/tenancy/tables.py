from __future__ import annotations

from piccolo.columns import (
    JSON,
    Boolean,
    ForeignKey,
    Integer,
    Timestamptz,
    Varchar,
)
from piccolo.table import Table

PLANS = {"starter": 2_000, "team": 10_000, "business": 50_000}  # the plans before the operator defines any


class Company(Table):
    name = Varchar(length=200, unique=True)
    plan = Varchar(length=20, default="team")
    credit_pool = Integer(default=PLANS["team"])  # monthly pool: its plan's, set by the operator (cli: plans)
    # a company admin's limits within the pool, 0 for none: what one person's runs and chat turns may use in a
    # period, and what the whole company may use in a day
    credit_limit_per_person = Integer(default=0)
    credit_limit_per_day = Integer(default=0)
    code_execution_enabled = Boolean(default=False)
    assistant_write_enabled = Boolean(default=True)
    followup_without_reapproval = Boolean(default=False)
    followup_grant_hours = Integer(default=24)  # how long a person's approval lets follow-ups skip approval
    followup_grant_max_runs = Integer(default=10)  # how many follow-ups one approval lets through
    flow_action_cap = Integer(default=20)  # how many action items one flow's steps may propose in all
    drive_quota_mb_per_user = Integer(default=2048)  # what one person's Drive files may add up to
    drive_quota_mb_per_company = Integer(default=20480)  # what the whole company's Drive may add up to
    drive_uploads_per_hour = Integer(default=200)  # files one person may upload in an hour
    # days a run's approved bundle is kept after it ran, so that an admin or auditor can re-run it for
    # evidence (backend/evidence/rerun.py); 0, the default: not kept
    evidence_retention_days = Integer(default=0)
    created_at = Timestamptz()
    # a demo company (`cleanroom demo seed`): its people keep the demo's short passwords; in any other company
    # a password that fails the policy no longer signs in (backend/tenancy/passwords.py)
    demo = Boolean(default=False)
    # how many active webhook endpoints the company has (backend/notify/admin.py keeps it): an event of a company
    # with none, on an installation that sends no mail, costs no query at all
    webhook_endpoints = Integer(default=0)
    # the pool's last threshold its admins were told of, "<period start>:<percent>" (backend/credits tell_pools)
    pool_told = Varchar(length=20, default="")


class User(Table, tablename="app_user"):
    company = ForeignKey(references=Company, null=False)
    email = Varchar(length=254, unique=True, index=True)
    name = Varchar(length=200)
    title = Varchar(length=200, default="")
    password_hash = Varchar(length=200, secret=True)  # "" until the person sets one by their link
    role = Varchar(length=10, default="member")  # admin | member | auditor (tenancy/context.py ROLES)
    active = Boolean(default=True)
    created_at = Timestamptz()


class Team(Table):
    company = ForeignKey(references=Company, null=False)
    name = Varchar(length=100)


class TeamMembership(Table):
    team = ForeignKey(references=Team, null=False, index=True)
    user = ForeignKey(references=User, null=False, index=True)
    is_manager = Boolean(default=False)


class PermissionSet(Table):
    company = ForeignKey(references=Company, null=False)
    name = Varchar(length=100)
    # {"dataset": "read" | "edit"}
    grants = JSON(default={})


class UserPermissionSet(Table):
    user = ForeignKey(references=User, null=False, index=True)
    permission_set = ForeignKey(references=PermissionSet, null=False)


class TeamPermissionSet(Table):
    """A team's grants: every member and manager of the team holds them (backend/tenancy/grid.py)."""

    team = ForeignKey(references=Team, null=False, index=True)
    permission_set = ForeignKey(references=PermissionSet, null=False)


class PersonLink(Table):
    """A one-time link a person sets their password with: an invitation (`invite`) or a reset (`reset`).
    Only its hash is stored; it is used once, expires, and can be revoked (backend/tenancy/people.py)."""

    user = ForeignKey(references=User, null=False, index=True)
    kind = Varchar(length=10)  # invite | reset
    token_hash = Varchar(length=64, unique=True, index=True)
    created_by = Varchar(length=300)
    created_at = Timestamptz()
    expires_at = Timestamptz()
    used_at = Timestamptz(null=True, default=None)
    revoked = Boolean(default=False)


class Session(Table, tablename="login_session"):
    token_hash = Varchar(length=64, unique=True, index=True)
    user = ForeignKey(references=User, null=False)
    created_at = Timestamptz()
    expires_at = Timestamptz()


class ApiToken(Table):
    user = ForeignKey(references=User, null=False)
    name = Varchar(length=100)
    prefix = Varchar(length=16)
    token_hash = Varchar(length=64, unique=True, index=True)
    created_at = Timestamptz()
    last_used_at = Timestamptz(null=True, default=None)
    revoked = Boolean(default=False)
    scope = Varchar(length=20, default="assistant")  # the one scope issued today; see tenancy/scopes.py


class LoginAttempt(Table):
    email = Varchar(length=254, index=True)
    ip = Varchar(length=64, default="", index=True)
    at = Timestamptz()
    succeeded = Boolean(default=False)


TABLES = [
    Company,
    User,
    Team,
    TeamMembership,
    PermissionSet,
    UserPermissionSet,
    TeamPermissionSet,
    PersonLink,
    Session,
    ApiToken,
    LoginAttempt,
]
