"""What the runs endpoints accept and return (the OpenAPI contract the console and the MCP server read)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from backend.credits.schemas import ApprovalCost
from backend.drive.schemas import DriveFileInfo
from backend.injection.schemas import Finding
from backend.runs.status import ApprovalKind, RunStatus
from backend.sandbox.models import SandboxResult

# ------------------------------------------------------------------------------------------------ requests


class LimitsBody(BaseModel):
    wall_seconds: int | None = Field(default=None, ge=1)
    memory_mib: int | None = Field(default=None, ge=1)
    vcpus: int | None = Field(default=None, ge=1)


# the service refuses code with nothing but spaces ("the code is empty", 422); the document says so
CODE_RULE: dict[str, Any] = {"pattern": r"\S"}


class ProposalBody(BaseModel):
    conversation_id: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=200)
    plan: str = Field(default="", max_length=20_000)
    code: str = Field(json_schema_extra=CODE_RULE)
    datasets: list[str] = Field(default_factory=list, max_length=12)
    files: list[int] = Field(default_factory=list, max_length=50)
    limits: LimitsBody | None = None
    # the person-approved run whose follow-up grant this run asks to use (same conversation); without it,
    # or outside that grant, the run waits for approval like any other
    followup_of: int | None = Field(default=None, ge=1)


class ApproveBody(BaseModel):
    """The hashes the approver saw on the approval screen; a mismatch refuses the approval."""

    code_sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")
    bundle_sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")


class ReasonBody(BaseModel):
    reason: str | None = Field(default=None, max_length=2000)


class AcknowledgeBody(BaseModel):
    """Why a finding is expected here: shown beside it on the approval screen and audited."""

    reason: str = Field(min_length=1, max_length=500)


class FindingAcknowledgementInfo(BaseModel):
    """An admin's "expected here" for the findings of one cell (by its sha256) in one column (None: a line
    of text); it lapses when the cell changes."""

    id: int
    cell_sha256: str
    column: str | None = None
    reason: str
    by: str
    at: datetime


class RevisionBody(BaseModel):
    code: str = Field(json_schema_extra=CODE_RULE)
    plan: str | None = Field(default=None, max_length=20_000)


# ----------------------------------------------------------------------------------------------- responses


class PersonRef(BaseModel):
    id: int
    email: str
    name: str


class RunSummary(BaseModel):
    """A run in the history list: no code, plan, manifest or result (the detail has those)."""

    id: int
    title: str
    status: RunStatus
    attempt: int
    conversation_id: str
    requested_by: PersonRef
    datasets: list[str]
    file_ids: list[int]
    created_at: datetime
    finished_at: datetime | None
    credits_charged: float | None
    findings_count: int
    schedule_id: int | None
    flow_id: int | None = None  # the flow this run is a step of
    flow_step: int | None = None


class RunPage(BaseModel):
    items: list[RunSummary]
    total: int  # every run matching the filters, not only this page


class RunsOnDay(BaseModel):
    day: str  # YYYY-MM-DD (UTC), the day the runs were proposed
    by_status: dict[str, int]  # only the statuses that occur


class TimingsOnDay(BaseModel):
    day: str  # YYYY-MM-DD (UTC), the day the runs finished
    runs: int  # finished runs that day
    vm_start_p50_seconds: (
        float | None
    )  # median VM launch to guest ready (timings_ms.start); None: no VM started
    duration_p50_seconds: float | None  # median finished_at - started_at; None: none had started


class RunStats(BaseModel):
    """The runs the caller may see (the run list's rule), per day over the last `days` days, oldest first."""

    days: int
    runs_per_day: list[RunsOnDay]
    timings_per_day: list[TimingsOnDay]


class QueuePoint(BaseModel):
    at: datetime
    depth: int  # the company's runs approved and not yet started (or ended unstarted) at that moment


class QueueHistory(BaseModel):
    """The caller's company's queue depth over the last `hours` hours, every `step_minutes`, oldest first."""

    hours: int
    step_minutes: int
    points: list[QueuePoint]


class Limits(BaseModel):
    wall_seconds: int
    memory_mib: int
    vcpus: int


class Approval(BaseModel):
    kind: ApprovalKind
    by: str  # a person's email; for the other kinds "followup:<run>" or "schedule:<schedule>"
    at: datetime
    code_sha256: str | None
    bundle_sha256: str | None


class Rejection(BaseModel):
    by: str
    at: datetime
    reason: str | None


class StagedFile(BaseModel):
    """A Drive file a run staged, by id and the name its manifest recorded."""

    id: int
    name: str


class FollowupGrant(BaseModel):
    """The follow-ups a person's approval of this run let skip approval: same conversation, a subset of
    this scope, until `expires_at`, at most `max_runs`."""

    expires_at: datetime
    max_runs: int
    used: int
    active: bool
    conversation_id: str
    datasets: list[str]
    file_ids: list[int]
    files: list[StagedFile]
    limits: Limits


class GrantOffer(BaseModel):
    """What approving this run would grant, said before the approver decides."""

    expires_at: datetime
    hours: int
    max_runs: int
    conversation_id: str
    datasets: list[str]
    file_ids: list[int]
    files: list[StagedFile]


class RunResult(SandboxResult):
    """What the sandbox returned, as stored: printed output already capped and marked by the sandbox; its
    parsed actions.json is not kept here (it became the run's action items)."""

    actions: None = Field(default=None, exclude=True)


class RunDetail(BaseModel):
    id: int
    title: str
    plan: str
    conversation_id: str
    status: RunStatus
    attempt: int
    max_attempts: int
    previous_attempt_id: int | None
    diff: str | None  # unified diff of the code against the previous attempt
    requested_by: PersonRef
    created_at: datetime
    code: str
    code_sha256: str
    datasets: list[str]
    file_ids: list[int]
    manifest: dict[str, Any]  # staging's manifest.json of the bundle: its files, errors and bundle hash
    bundle_sha256: str
    findings: list[Finding]
    limits: Limits
    approval: Approval | None
    rejection: Rejection | None
    narrowed_from: int | None  # the run whose follow-up grant let this one skip approval
    followup_grant: FollowupGrant | None
    followup_grant_on_approval: GrantOffer | None
    followup_note: str | None  # why a proposed follow-up still waits for approval
    schedule_id: int | None
    can_decide: bool  # the caller may approve or reject it now
    approve_blocked_reason: str | None
    result: RunResult | None
    error_message: str | None
    output_files: list[DriveFileInfo]
    output_folder_id: int | None
    credits_charged: float | None
    actions_discarded: bool
    actions_note: str | None  # why the run's actions.json became no items
    action_items_count: int
    started_at: datetime | None
    finished_at: datetime | None
    host_id: str | None = None  # the hypervisor host that ran it (a fleet worker); None: the API's own
    flow_id: int | None = None  # the flow this run is a step of (approved, and shown, with its flow)
    # instruction-like text in what it handed back (printed output, conclusion.json, returned text files),
    # scanned before the assistant reads it; output_notice is the line that tells the assistant to treat it as data
    output_findings: list[Finding] = []
    output_notice: str | None = None
    flow_step: int | None = None
    # what its results are computed from: its staged data and, for a flow's step, every earlier step's
    source_datasets: list[str] = Field(default_factory=list)
    # why its printed output and staged excerpts are not shown: the caller may no longer read a source
    withheld: str | None = None
    # while it awaits approval (a run, not a flow's step): its maximum cost, what its approval would reserve,
    # beside what is left of the pool and of an admin's limit when that is tighter
    approval_cost: ApprovalCost | None = None
