"""What the flows endpoints accept and return."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from backend.flows.status import Capability, FlowStatus
from backend.runs.schemas import CODE_RULE, LimitsBody, PersonRef, Rejection, RunDetail

MAX_STEPS = 10

# ------------------------------------------------------------------------------------------------ requests


class ReceiveBody(BaseModel):
    """An output file of an earlier step handed to this one (at /work/flow/step-<step>/<name>)."""

    step: int = Field(ge=1)
    name: str = Field(min_length=1, max_length=200)


class StepBody(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    code: str = Field(json_schema_extra=CODE_RULE)
    datasets: list[str] = Field(default_factory=list, max_length=12)
    files: list[int] = Field(default_factory=list, max_length=50)
    capability: Capability = Capability.read
    receives: list[ReceiveBody] = Field(default_factory=list, max_length=20)
    limits: LimitsBody | None = None


class FlowBody(BaseModel):
    conversation_id: str = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=200)
    plan: str = Field(default="", max_length=20_000)
    # none, or more than MAX_STEPS, is refused by the service with its own message (`no_steps`,
    # `too_many_steps`); this bounds the body, and the document says at least one
    steps: list[StepBody] = Field(max_length=100, json_schema_extra={"minItems": 1})


class StepHashes(BaseModel):
    code_sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")
    bundle_sha256: str = Field(min_length=64, max_length=64, pattern="^[0-9a-f]{64}$")


class FlowApproveBody(BaseModel):
    """Every step's hashes as the approver saw them, in step order; any mismatch refuses the approval."""

    steps: list[StepHashes] = Field(min_length=1, max_length=MAX_STEPS)


# ----------------------------------------------------------------------------------------------- responses


class Received(BaseModel):
    step: int
    name: str


class CarriedFile(BaseModel):
    """A file a step was handed at its start, as /work/flow/<name> in its guest."""

    name: str
    sha256: str
    size: int


class FlowStep(BaseModel):
    step: int
    title: str
    capability: Capability
    receives: list[Received]  # the named outputs of earlier steps it is handed, besides their conclusions
    conclusion: Any | None  # its /work/output/conclusion.json, parsed (None until it ran, or without one)
    carried: list[CarriedFile] | None  # what it was handed at its start (None until it started)
    # what its outputs, conclusion and what it hands on are tagged with: its own sources and every
    # earlier step's (their conclusions always reach it)
    source_datasets: list[str] = Field(default_factory=list)
    # why its conclusion and what it was handed are not shown: the caller may no longer read a source
    withheld: str | None = None
    run: RunDetail  # the step's run: code, manifest, findings, hashes, status, timings, outputs


class FlowApproval(BaseModel):
    by: str
    at: datetime


class FlowSummary(BaseModel):
    id: int
    title: str
    status: FlowStatus
    conversation_id: str
    requested_by: PersonRef
    step_count: int
    step_statuses: list[str]
    created_at: datetime
    finished_at: datetime | None
    credits_total: float


class FlowPage(BaseModel):
    items: list[FlowSummary]
    total: int


class FlowDetail(BaseModel):
    id: int
    title: str
    plan: str
    conversation_id: str
    status: FlowStatus
    requested_by: PersonRef
    created_at: datetime
    finished_at: datetime | None
    flow_sha256: str  # over every step's code and bundle hashes, capability and what it receives
    action_cap: int  # action items its steps may propose in all
    action_items_count: int
    approval: FlowApproval | None
    rejection: Rejection | None
    schedule_id: int | None
    can_decide: bool
    approve_blocked_reason: str | None
    credits_total: float  # every step's charge
    steps: list[FlowStep]
