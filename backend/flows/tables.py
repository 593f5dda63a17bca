from __future__ import annotations

from enum import StrEnum

from piccolo.columns import ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.tenancy.tables import Company, User


class FlowStatus(StrEnum):
    awaiting_approval = "awaiting_approval"
    rejected = "rejected"
    running = "running"  # approved: its steps run one after the other
    succeeded = "succeeded"  # every step succeeded
    failed = "failed"  # a step did not succeed; the later ones were skipped


class Capability(StrEnum):
    """What a step may do besides computing: `read` (its actions.json is discarded unread) or
    `propose_writes` (its actions become action items, each accepted by a person)."""

    read = "read"
    propose_writes = "propose_writes"


FLOW_FINISHED = (FlowStatus.rejected, FlowStatus.succeeded, FlowStatus.failed)


class Flow(Table):
    """The steps are runs (`Run.flow_id`, `Run.flow_step`): this row holds what they share."""

    company = ForeignKey(references=Company, null=False, index=True)
    requested_by = ForeignKey(references=User, null=False, index=True)
    conversation_id = Varchar(length=100, index=True)
    title = Varchar(length=200)
    plan = Text()
    status = Varchar(length=20, index=True)
    step_count = Integer(default=0)
    flow_sha256 = Varchar(length=64)  # over every step's code, bundle, capability and what it receives
    action_cap = Integer(default=20)  # the company's flow_action_cap when it was proposed
    created_at = Timestamptz()
    updated_at = Timestamptz()
    approved_by = Varchar(length=254, null=True, default=None)  # a person's email, or "schedule:<id>"
    approved_at = Timestamptz(null=True, default=None)
    rejected_by = Varchar(length=254, null=True, default=None)
    rejected_at = Timestamptz(null=True, default=None)
    rejection_reason = Text(null=True, default=None)
    finished_at = Timestamptz(null=True, default=None)
    schedule_id = Integer(null=True, default=None)  # the schedule whose firing made it


TABLES = [Flow]
