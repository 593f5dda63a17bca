from __future__ import annotations

from piccolo.columns import Boolean, ForeignKey, Integer, Real, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company, User


class CreditCharge(Table):
    company = ForeignKey(references=Company, null=False, index=True)
    user = ForeignKey(references=User, null=False)
    run_id = Integer(index=True)
    run_title = Varchar(
        length=200, default=""
    )  # the run's title when it was charged (the usage report's line)
    # a flow's step: its flow, and the flow's title then (the usage report's flow line)
    flow_id = Integer(null=True, default=None, index=True)
    flow_title = Varchar(length=200, default="")
    credits = Real()
    vcpu_seconds = Real()
    gib_seconds = Real()
    at = Timestamptz()


class PlatformCharge(Table):
    """What the assistant platform charged to a company's pool for something that already happened (a chat
    turn, or another named kind), filed once per idempotency key of each platform credential."""

    company = ForeignKey(references=Company, null=False, index=True)
    user = ForeignKey(references=User, null=False)
    kind = Varchar(length=32)
    credits = Real()
    idempotency_key = Varchar(length=200)  # the platform's own key, as it sent it
    # sha256 of the credential's id and its key (`platform.token_key`): one charge per key *per credential*,
    # so a second platform using the same key scheme neither collides with nor learns of another's charges.
    # 200 long: the column was the unique `idempotency_key` before (migration 2026-12-06T04:30:00).
    token_key = Varchar(length=200, unique=True, index=True)
    token_id = Integer(default=0)  # the platform credential that filed it
    left_after = Real(default=0.0)  # what was left of the pool right after it (the answer a replay gets)
    at = Timestamptz()


class PlatformToken(Table):
    """An operator-issued credential of the assistant platform: only its hash is kept; it reaches the
    platform routes (/api/platform/...) and nothing else. Not a person, not an assistant."""

    name = Varchar(length=100)
    prefix = Varchar(length=16)
    token_hash = Varchar(length=64, unique=True, index=True)
    created_at = Timestamptz()
    created_by = Varchar(length=254, default="")
    last_used_at = Timestamptz(null=True, default=None)
    revoked = Boolean(default=False)
    # the operator's explicit choice that it may charge every company; otherwise only the companies its
    # PlatformTokenCompany rows name (none: it charges nobody, as credentials made before scopes existed)
    all_companies = Boolean(default=False)


class PlatformTokenCompany(Table):
    """A company a platform credential may charge (`cleanroom platform token create NAME --company ...`)."""

    token = ForeignKey(references=PlatformToken, null=False, index=True)
    company = ForeignKey(references=Company, null=False)


class CreditPlan(Table):
    """A plan the operator defined: its name and the credits its companies' pool holds each month."""

    name = Varchar(length=20, unique=True)
    monthly_credits = Integer()
    updated_at = Timestamptz()


class CreditTopUp(Table):
    """Credits the operator added to a company's pool for the period it was made in."""

    company = ForeignKey(references=Company, null=False, index=True)
    credits = Integer()
    reason = Varchar(length=500, default="")
    actor = Varchar(length=254, default="")
    at = Timestamptz()


TABLES = [CreditCharge, PlatformCharge, PlatformToken, PlatformTokenCompany, CreditPlan, CreditTopUp]
