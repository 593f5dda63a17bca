"""What the tools return and accept: the API's own schemas, subclassed where MCP adds fields or descriptions.

A tool's structured content validates against the API schema its model extends (a run view is a `RunDetail`,
a listed dataset a `DatasetInfo`, an output file a `DriveFileInfo`, …); findings and action items are the
API's models as they are. Only the envelopes no API object matches are MCP's own: the dataset and Drive
listings, a proposal's answer and a manifest entry as a path inside the run.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from backend.actions.schemas import ActionItemInfo
from backend.drive.schemas import DriveFileInfo
from backend.flows.schemas import FlowDetail, FlowStep, ReceiveBody, StepBody
from backend.flows.schemas import Received as ApiReceived
from backend.injection.schemas import Finding
from backend.records.columns import ColumnKind
from backend.records.schemas import DatasetInfo
from backend.runs.schemas import LimitsBody, RunDetail
from backend.runs.schemas import RunResult as ApiRunResult

# ---------------------------------------------------------------------------------------------- outputs


class Column(BaseModel):
    name: str
    type: ColumnKind = Field(
        description="integer, number, string, boolean, date (YYYY-MM-DD), datetime (ISO 8601)"
    )


class DatasetListing(DatasetInfo):
    """A dataset the user may read (the records API's `DatasetInfo`), with its row counts."""

    name: str = Field(
        description="use this name in propose_run's `datasets`; staged as /work/input/datasets/<name>.csv"
    )
    access: Literal["read", "edit"] | None = Field(
        description="read or edit (edit: changes to it may be proposed in actions.json)"
    )
    columns: list[Column]
    visible_rows: int = Field(description="rows of this dataset this user may see")
    export_rows: int = Field(description="rows a run would receive")
    export_truncated: bool = Field(description="true when the export stops at the row cap")


class DatasetList(BaseModel):
    datasets: list[DatasetListing]
    export_row_cap: int


class DriveFile(DriveFileInfo):
    """A Drive file (the Drive API's `DriveFileInfo`) with its folder's path."""

    id: int = Field(description="use this id in propose_run's `files`")
    folder: str | None = Field(description="folder path, or null at the top level")
    type: str = Field(description="spreadsheet, csv, pdf, image, text, ...")
    size: int = Field(description="bytes")
    run_id: int | None = Field(default=None, description="set when the file is an output of that run")


class UploadedFile(BaseModel):
    file: DriveFileInfo = Field(description="the stored file; its id goes into propose_run's `files`")
    user_used_bytes: int = Field(description="what this user now keeps in Drive (the trash included)")
    user_quota_bytes: int = Field(description="this user's Drive quota")


class DriveFileList(BaseModel):
    files: list[DriveFile]
    total: int
    query: str | None = None


class StagedFile(BaseModel):
    """One entry of a run's staged manifest, as a path inside the run."""

    path: str = Field(description="path inside the run, under /work/input/")
    source: str
    kind: str | None = None
    rows: int | None = None
    visible_total: int | None = None
    truncated: bool | None = None
    bytes: int | None = None


class RunProposal(BaseModel):
    run_id: int
    status: str
    conversation_id: str
    attempt: int
    max_attempts: int
    attempt_label: str = Field(description='e.g. "attempt 2 of 3"')
    console_url: str = Field(description="where the person reviews and approves this run")
    needs_approval: bool
    approved_without_review: bool = Field(
        description="a follow-up queued under an earlier approval's grant, without a new approval"
    )
    manifest: list[StagedFile]
    manifest_errors: list[dict[str, Any]]
    bundle_sha256: str | None = None
    findings: list[Finding] = Field(
        description="instruction-like text found in the staged data (shown to the person)"
    )
    previous_attempt_id: int | None = None
    diff: str | None = Field(default=None, description="unified diff against the previous attempt")
    followup_of: int | None = None
    followup_note: str | None = Field(default=None, description="why a follow-up still needs approval")
    message: str


class OutputFile(DriveFileInfo):
    """An output file of a run (the Drive API's `DriveFileInfo`), and how to read it over MCP."""

    type: str
    uri: str = Field(description="read the whole file as an MCP resource")
    inline: bool = Field(description="returned in this result (image, or text up to the size cap)")


class RunResult(ApiRunResult):
    """What the sandbox returned (the runs API's `RunResult`), printed output cut for the assistant."""

    returned_truncated: bool = Field(
        default=False, description="printed output cut here; the console has it all"
    )


class RunView(RunDetail):
    """A run as the runs API shows it (`RunDetail`), with what the assistant reads first pulled up."""

    run_id: int
    finished: bool
    console_url: str
    approved_by: str | None = None
    rejection_reason: str | None = None
    result: RunResult | None = None
    output_files: list[OutputFile] = []
    action_items: list[ActionItemInfo] = Field(
        default=[], description="the changes it proposed; a person accepts or rejects each"
    )
    can_revise: bool = Field(description="a failed attempt that revise_run may retry")
    status_changes: list[str] = Field(
        description="changes seen while waiting, e.g. 'awaiting_approval → queued'"
    )
    waited_seconds: float


class FlowStepProposal(BaseModel):
    step: int
    title: str
    capability: str = Field(description="read, or propose_writes (its actions.json becomes action items)")
    receives: list[ApiReceived]
    run_id: int = Field(description="the step's own run (get_run reads it; its outputs are resources)")
    status: str
    manifest: list[StagedFile] = Field(description="what this step's VM gets under /work/input/")
    manifest_errors: list[dict[str, Any]]
    findings: list[Finding] = Field(
        description="instruction-like text found in this step's staged data (shown to the person)"
    )
    code_sha256: str
    bundle_sha256: str | None = None


class FlowProposal(BaseModel):
    flow_id: int
    title: str
    status: str
    conversation_id: str
    console_url: str = Field(description="where the person reviews and approves the whole flow")
    needs_approval: bool
    flow_sha256: str = Field(description="over every step's code and data hashes, capability and receives")
    steps: list[FlowStepProposal]
    message: str


class FlowStepView(FlowStep):
    """A step as the flows API shows it (`FlowStep`, its run included), with its run's state pulled up."""

    run_id: int = Field(description="get_run with this id returns the step's charts and tables inline")
    status: str = Field(
        description="awaiting_approval, waiting (for the steps before it), queued, running, succeeded, failed, "
        "timed_out, out_of_memory, error, skipped (an earlier step did not succeed), rejected or cancelled"
    )
    finished: bool
    conclusion: Any = Field(
        default=None, description="its /work/output/conclusion.json, parsed; every later step gets it"
    )
    result: RunResult | None = None
    error_message: str | None = Field(default=None, description="why it did not succeed, or was skipped")
    output_files: list[OutputFile] = []
    action_items: list[ActionItemInfo] = []
    actions_note: str | None = Field(default=None, description="why its actions.json became no items")
    credits_charged: float | None = None


class FlowView(FlowDetail):
    """A flow as the flows API shows it (`FlowDetail`), with what the assistant reads first pulled up."""

    flow_id: int
    finished: bool
    console_url: str
    approved_by: str | None = None
    rejection_reason: str | None = None
    approve_blocked_reason: str | None = Field(
        default=None, description="why the person cannot approve it right now (credits, code execution off)"
    )
    steps: list[FlowStepView]
    status_changes: list[str] = Field(
        description="changes seen while waiting, e.g. 'step 1: queued → running'"
    )
    waited_seconds: float


# ---------------------------------------------------------------------------------------------- inputs


class Limits(LimitsBody):
    """Lower limits for the run (the defaults are the maximum)."""

    wall_seconds: int | None = Field(default=None, ge=1, description="wall-clock seconds, at most 120")
    memory_mib: int | None = Field(default=None, ge=256, description="memory in MiB, at most 2048")
    vcpus: int | None = Field(default=None, ge=1, description="virtual CPUs, at most 2")


class Received(ReceiveBody):
    """An output file of an earlier step handed to a later one, read-only at /work/flow/step-<step>/<name>."""

    step: int = Field(ge=1, description="the earlier step (1 is the first) that writes the file")
    name: str = Field(
        min_length=1, max_length=200, description="a plain file name that step writes to /work/output/"
    )


MAX_WAIT_SECONDS = 60
RunId = Annotated[int, Field(ge=1, description="the run id returned by propose_run")]
Title = Annotated[str, Field(min_length=1, max_length=200, description="a short title the person sees")]
Plan = Annotated[
    str,
    Field(
        max_length=20_000,
        description="in plain words: what the code does with which data, and what changes it may propose",
    ),
]
Code = Annotated[
    str,
    Field(
        min_length=1,
        description="the full Python program; reads /work/input/..., writes /work/output/..., no network",
    ),
]
Datasets = Annotated[
    list[str],
    Field(
        max_length=12,
        description="dataset names from list_datasets, staged as /work/input/datasets/<name>.csv",
    ),
]
FileIds = Annotated[
    list[int], Field(max_length=50, description="Drive file ids from list_drive_files or search_drive")
]
ConversationId = Annotated[
    str | None,
    Field(max_length=100, description="the chat this belongs to; a new one is made when omitted"),
]
WaitSeconds = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="wait up to this many seconds (at most 60) for it to move on, with progress "
        "notifications; 0 answers at once",
    ),
]


class FlowStepInput(StepBody):  # the flows API's StepBody, described for the model
    """One step of a flow: a run of its own, in its own fresh VM."""

    title: Title
    code: Annotated[
        str,
        Field(
            min_length=1,
            description="the full Python program of this step; reads /work/input/... and what earlier steps "
            "handed on under /work/flow/, writes /work/output/... (conclusion.json goes to every later step)",
        ),
    ]
    datasets: Datasets = []
    files: FileIds = []
    # the API's Capability values, spelled as the literal the tool has always published (its schema and errors)
    capability: Literal["read", "propose_writes"] = Field(  # type: ignore[assignment]
        default="read",
        description="read: its actions.json is discarded unread; propose_writes: its actions.json becomes "
        "proposed changes a person accepts or rejects one at a time",
    )
    receives: list[Received] = Field(
        default=[],
        max_length=20,
        description="output files of earlier steps this step gets at /work/flow/step-<step>/<name>",
    )
    limits: Limits | None = None
