from __future__ import annotations

from piccolo.columns import ForeignKey, Integer, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.flows.status import FLOW_FINISHED, Capability, FlowStatus
from backend.tenancy.tables import Company, User

__all__ = ["FLOW_FINISHED", "Capability", "Flow", "FlowStatus"]


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
