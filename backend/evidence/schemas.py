"""What the evidence endpoints return: the evidence pack and the re-runs for evidence with their comparison."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class EvidencePack(BaseModel):
    format: int
    run: dict[str, Any]
    revisions: list[dict[str, Any]]
    manifest: dict[str, Any]
    warnings_at_approval: list[dict[str, Any]]
    approval: dict[str, Any] | None
    rejection: dict[str, Any] | None
    isolation: dict[str, Any]
    outputs: list[dict[str, Any]]
    rejected_outputs: list[dict[str, Any]]
    # why `outputs`, `rejected_outputs`, the entries' output names and the re-runs' files are empty: the reader
    # may not see what the run made (runs.read.contents_withheld); None when they are listed
    outputs_withheld: str | None = None
    action_items: list[dict[str, Any]]
    actions_discarded: bool
    credits_charged: float | None
    audit_entries: list[dict[str, Any]]
    reruns: list[dict[str, Any]] = []  # re-runs for evidence: who asked, and what matched (never charged)


class RerunFile(BaseModel):
    name: str
    original_sha256: str | None  # None: the original run wrote no such file
    rerun_sha256: str | None  # None: the re-run did not write it
    match: bool


class RerunComparison(BaseModel):
    printed_output_match: bool  # the same printed output (compared by sha256; the text is not shown here)
    status_match: bool
    exit_code_match: bool
    files: list[RerunFile]
    files_matched: int
    all_match: bool


class Rerun(BaseModel):
    id: int
    run_id: int
    status: str  # queued | running | finished | refused | error
    requested_by: str
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error_message: str | None
    outcome: dict[str, Any] | None  # the re-run VM's status, exit code, files (name, size, sha256), vm
    comparison: RerunComparison | None
    # why the outcome's and comparison's files (names, hashes, refused files) and the guest's error are not
    # shown: the reader may not see what the run made (runs.read.contents_withheld); None when they are
    withheld: str | None = None
    charged: bool  # always false: a re-run for evidence draws nothing from the credit pool
    credits: float


class Reruns(BaseModel):
    run_id: int
    retention_days: int  # the company's setting now (0: bundles are not kept)
    kept_until: datetime | None  # while the bundle is kept, until when
    available: bool  # whether a re-run may be asked for now
    unavailable_code: str | None
    unavailable_reason: str | None
    items: list[Rerun]  # newest first


class RerunVm(BaseModel):
    """The re-run VM's isolation facts, as `Rerun.outcome["vm"]` holds them."""

    model_config = ConfigDict(extra="allow")

    nics: int | None = None


class RerunOutcome(BaseModel):
    """`Rerun.outcome` read by attribute (the API sends it as the object the re-run stored)."""

    model_config = ConfigDict(extra="allow")

    status: str | None = None
    exit_code: int | None = None
    actions_discarded: bool | None = None
    vm: RerunVm | None = None

    @classmethod
    def of(cls, outcome: dict[str, Any] | None) -> RerunOutcome:
        return cls.model_validate(outcome or {})
