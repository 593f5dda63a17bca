from __future__ import annotations

from piccolo.columns import JSON, BigInt, Boolean, ForeignKey, Integer, Real, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.runs.status import FINISHED, RETRYABLE, STATUSES, ApprovalKind, RunStatus
from backend.tenancy.tables import Company, User

__all__ = ["FINISHED", "RETRYABLE", "STATUSES", "ApprovalKind", "Run", "RunStatus"]


class Run(Table):
    company = ForeignKey(references=Company, null=False, index=True)
    requested_by = ForeignKey(references=User, null=False, index=True)
    conversation_id = Varchar(length=100, index=True)
    title = Varchar(length=200)
    plan = Text()
    code = Text()
    code_sha256 = Varchar(length=64)
    datasets = JSON(default=[])
    file_ids = JSON(default=[])
    limits = JSON(default={})
    status = Varchar(length=20, index=True)
    attempt = Integer(default=1)
    root_run_id = Integer(null=True, default=None, index=True)
    previous_attempt_id = Integer(null=True, default=None)
    bundle_dir = Varchar(length=500)
    bundle_sha256 = Varchar(length=64)
    manifest = JSON(default={})
    staged_bytes = BigInt(default=0)  # the bytes the manifest lists (runs.quotas sums them in SQL)
    findings = JSON(default=[])
    created_at = Timestamptz()
    updated_at = Timestamptz()
    # approval, bound to the hashes the approver saw
    approval_kind = Varchar(length=10, null=True, default=None)  # an ApprovalKind
    approved_by = Varchar(
        length=254, null=True, default=None
    )  # the person's email, "followup:<run>", "schedule:<id>"
    approved_at = Timestamptz(null=True, default=None)
    approved_code_sha256 = Varchar(length=64, null=True, default=None)
    approved_bundle_sha256 = Varchar(length=64, null=True, default=None)
    narrowed_from = Integer(null=True, default=None)
    # the follow-up grant a person's approval of this run gives (none for runs nobody approved)
    followup_grant_expires_at = Timestamptz(null=True, default=None)
    followup_grant_max_runs = Integer(default=0)
    followup_grant_used = Integer(default=0)  # follow-ups let through; claimed by a conditional update
    followup_note = Text(null=True, default=None)  # why a proposed follow-up still needs approval
    rejected_by = Varchar(length=254, null=True, default=None)
    rejected_at = Timestamptz(null=True, default=None)
    rejection_reason = Text(null=True, default=None)
    # execution
    schedule_id = Integer(null=True, default=None)
    read_actions = Boolean(default=True)
    started_at = Timestamptz(null=True, default=None)
    finished_at = Timestamptz(null=True, default=None)
    result = JSON(null=True, default=None)
    error_message = Text(null=True, default=None)
    output_folder_id = Integer(null=True, default=None)
    credits_charged = Real(null=True, default=None)
    # its maximum cost, held against the company's pool from its approval until it is charged or ends
    # unstarted (backend/runs/holds.py); 0 for a run approved before reservations
    credits_reserved = Real(default=0.0)
    actions_discarded = Boolean(default=False)
    actions_note = Text(null=True, default=None)
    action_items_count = Integer(default=0)  # written once, when its actions.json became items
    # scale-out (backend/fleet): which host holds it, when and to which host it was handed, when its VM began
    host_id = Varchar(length=64, null=True, default=None, index=True)
    dispatched_at = Timestamptz(null=True, default=None)
    dispatched_to = Varchar(length=64, null=True, default=None)  # the one host whose worker may claim it
    vm_started_at = Timestamptz(null=True, default=None)
    # the id of the API request that proposed it (X-Request-Id, backend/observe.py): its worker's log lines carry it
    request_id = Varchar(length=64, null=True, default=None)
    # flows (backend/flows): the flow and the step (1-based) this run is, the earlier steps' outputs it
    # receives ([{"step": j, "name": "summary.csv"}]), what it was handed at its start (names, hashes) and
    # the conclusion it wrote (/work/output/conclusion.json, parsed, within its cap)
    flow_id = Integer(null=True, default=None, index=True)
    flow_step = Integer(null=True, default=None)
    receives = JSON(default=[])
    carried = JSON(null=True, default=None)
    conclusion = JSON(null=True, default=None)
    # the datasets what it produced is computed from (its stdout, outputs, conclusion, what it hands on):
    # those it staged, those its staged Drive files were computed from, and for a flow's step those of
    # every earlier step (runs/sources.py); written when it is handed its carry and when it ends
    source_datasets = JSON(null=True, default=None)


TABLES = [Run]
