"""The run tools: propose_run, revise_run, ask_followup, get_run, and each run's output files as resources."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent
from pydantic import Field

from backend.drive.schemas import DriveFileInfo
from backend.mcp.api import ApiError, CleanroomApi
from backend.mcp.tools import render, views
from backend.mcp.tools.common import (
    FILE_URI,
    FINAL,
    PROPOSES,
    READONLY,
    RETRYABLE,
    Setup,
    is_text,
    limits_body,
    mime_for,
    new_conversation,
    run_page,
    tool_errors,
)
from backend.mcp.tools.models import (
    Code,
    ConversationId,
    Datasets,
    FileIds,
    Limits,
    OutputFile,
    Plan,
    RunId,
    RunProposal,
    RunView,
    Title,
    WaitSeconds,
)
from backend.mcp.tools.waiting import seen_run, wait
from backend.runs.schemas import RunDetail
from backend.runs.status import ApprovalKind, RunStatus

TEXT_PREVIEW_CAP = 16 * 1024  # bytes of one CSV/text output returned inline
TEXT_PREVIEW_TOTAL = 64 * 1024
IMAGE_INLINE_CAP = 4 * 1024 * 1024  # an image larger than this is returned as a link only
IMAGES_INLINE_MAX = 8


def register(mcp: MCPServer, setup: Setup) -> None:
    connect, console = setup.connect, setup.console

    @mcp.tool(annotations=PROPOSES)
    async def propose_run(
        ctx: Context,
        title: Title,
        plan: Plan,
        code: Code,
        datasets: Datasets = [],  # noqa: B006 - pydantic copies defaults
        files: FileIds = [],  # noqa: B006
        conversation_id: ConversationId = None,
        limits: Limits | None = None,
    ) -> Annotated[CallToolResult, RunProposal]:
        """Propose a Python run on the user's data. The server checks the syntax, stages exactly the data this
        user may see and scans it; the run then WAITS for the person's approval in the console (the result
        carries the link: tell the user). Returns the run id, the staged manifest and any warnings about
        instruction-like text in the data. Then call get_run with wait_seconds."""
        with tool_errors("propose_run"):
            body = _proposal_body(
                conversation_id or new_conversation(), title, plan, code, datasets, files, limits
            )
            run = await connect(ctx).propose_run(body)
            return render.proposal_result(_proposal(run, console))

    @mcp.tool(annotations=PROPOSES)
    async def revise_run(
        ctx: Context,
        run_id: Annotated[int, Field(ge=1, description="the failed run (its latest attempt)")],
        code: Code,
        plan: Annotated[
            str | None, Field(max_length=20_000, description="a new plan; the old one when omitted")
        ] = None,
    ) -> Annotated[CallToolResult, RunProposal]:
        """Revise a failed run (failed, timed out, out of memory, error) with corrected code: a new attempt over
        the same data that again waits for the person's approval. Returns "attempt n of 3" and the diff the
        person will see. Only a failed latest attempt can be revised, 3 attempts in all."""
        with tool_errors("revise_run"):
            body: dict[str, Any] = {"code": code}
            if plan is not None:
                body["plan"] = plan
            run = await connect(ctx).revise_run(run_id, body)
            return render.proposal_result(_proposal(run, console))

    @mcp.tool(annotations=PROPOSES)
    async def ask_followup(
        ctx: Context,
        followup_of: Annotated[
            int, Field(ge=1, description="the earlier run, approved by the person, this follows up on")
        ],
        title: Title,
        plan: Plan,
        code: Code,
        datasets: Datasets = [],  # noqa: B006
        files: FileIds = [],  # noqa: B006
        limits: Limits | None = None,
    ) -> Annotated[CallToolResult, RunProposal]:
        """A follow-up run in the same conversation as `followup_of`. It runs at once, without a new approval,
        only when the company allows follow-ups, the person's approval of that run granted them (unexpired, runs
        left) and the datasets, files and limits are a subset of that run's; otherwise it waits for approval
        like any run and `followup_note` says why. Without datasets and files it uses the earlier run's."""
        with tool_errors("ask_followup"):
            api = connect(ctx)
            earlier = await api.run(followup_of)
            if not datasets and not files:  # the same data as the earlier run
                datasets, files = list(earlier.datasets), list(earlier.file_ids)
            body = _proposal_body(earlier.conversation_id, title, plan, code, datasets, files, limits)
            run = await api.propose_run({**body, "followup_of": followup_of})
            return render.proposal_result(_proposal(run, console, followup_of=followup_of))

    @mcp.tool(annotations=READONLY)
    async def get_run(
        ctx: Context,
        run_id: RunId,
        wait_seconds: WaitSeconds = 0,
        until: Annotated[
            Literal["finished", "change"],
            Field(description="'finished': return when the run ends; 'change': at its next status change"),
        ] = "finished",
        include_outputs: Annotated[
            bool,
            Field(
                description="return charts and text outputs inline (false: resource links only, e.g. when "
                "checking a run again whose outputs you already have)"
            ),
        ] = True,
    ) -> Annotated[CallToolResult, RunView]:
        """A run's status and, once finished, its printed output, charts (as images), CSV/text outputs (as text
        up to a size cap, plus a resource link to each whole file) and the changes it proposed with their status
        (a person accepts or rejects each). Statuses: awaiting_approval → queued → running → succeeded | failed
        | timed_out | out_of_memory | error, or rejected / cancelled. Still waiting or running after
        wait_seconds? Call again; the run continues whether or not you wait."""
        with tool_errors("get_run"):
            api = connect(ctx)
            started = time.monotonic()
            run = await api.run(run_id)
            changes: list[str] = []
            if wait_seconds and run.status not in FINAL:
                waiting = api = api.fresh()  # a wait outlives this request: every poll checks the token again

                async def fetch(ask: int | None, seen: str | None) -> RunDetail:
                    return await waiting.run(run_id, wait_seconds=ask, seen_status=seen)

                run, changes = await wait(ctx, fetch, run, seen_run, wait_seconds, until, long_poll=True)
            waited = time.monotonic() - started
            return await _run_result(api, run, console, changes, waited, include_outputs)

    @mcp.resource(
        FILE_URI,
        name="run_output_file",
        title="Run output file",
        description="One output file of a finished run, whole (images and other binaries base64-encoded).",
        mime_type="application/octet-stream",
    )
    async def run_output_file(run_id: str, name: str, ctx: Context) -> str | bytes:
        try:
            api = connect(ctx)
            run = await api.run(int(run_id))
            match = next((f for f in run.output_files if f.name == name), None)
            if match is None:
                raise ResourceError(f"run {run_id} has no output file named {name!r}")
            data, _ = await api.file_content(match.id)
        except (ApiError, ValueError) as exc:
            raise ResourceError(str(exc)) from None
        if mime_for(name, data).startswith("image/") or not is_text(match):
            return data
        return data.decode("utf-8", errors="replace")


def _proposal_body(
    conversation_id: str,
    title: str,
    plan: str,
    code: str,
    datasets: list[str],
    files: list[int],
    limits: Limits | None,
) -> dict[str, Any]:
    """The body of `POST /api/runs` for a new proposal or a follow-up (the API's ProposalBody)."""
    body: dict[str, Any] = {
        "conversation_id": conversation_id,
        "title": title,
        "plan": plan,
        "code": code,
        "datasets": datasets,
        "files": files,
    }
    if limits_body(limits):
        body["limits"] = limits_body(limits)
    return body


def _proposal(run: RunDetail, console_url: str, *, followup_of: int | None = None) -> RunProposal:
    auto = run.approval is not None and run.approval.kind == ApprovalKind.followup
    needs = run.status == RunStatus.awaiting_approval
    url = run_page(console_url, run.id)
    findings = views.findings(run)
    staged = views.staged(run)
    label = f"attempt {run.attempt} of {run.max_attempts}"
    if needs:
        message = f"Run {run.id} ({label}) waits for the person's approval: ask them to review it at {url}."
    elif auto:
        message = f"Run {run.id} was queued without a new approval under the grant of run {followup_of}."
    else:
        message = f"Run {run.id} is {run.status}."
    message += render.data_notes(findings, staged)
    if run.followup_note:
        message += f" Follow-up needs approval: {run.followup_note}."
    return RunProposal(
        run_id=run.id,
        status=run.status,
        conversation_id=run.conversation_id or "",
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        attempt_label=label,
        console_url=url,
        needs_approval=needs,
        approved_without_review=auto,
        manifest=staged,
        manifest_errors=views.manifest_errors(run),
        bundle_sha256=run.bundle_sha256,
        findings=findings,
        previous_attempt_id=run.previous_attempt_id,
        diff=run.diff,
        followup_of=followup_of,
        followup_note=run.followup_note,
        message=message,
    )


async def _run_result(
    api: CleanroomApi,
    run: RunDetail,
    console: str,
    changes: list[str],
    waited: float,
    include_outputs: bool = True,
) -> CallToolResult:
    """The run as get_run shows it: which outputs come inline is decided from the listing, then every file
    and the proposed changes are fetched at once."""
    status = run.status
    finished = status in FINAL
    plan: list[tuple[DriveFileInfo, str | None, int]] = []  # (file, "image" | "text" | None, text cap)
    images, text_budget = 0, TEXT_PREVIEW_TOTAL
    for f in run.output_files if finished else []:
        size = int(f.size or 0)
        is_image = f.kind == "image" or mime_for(f.name).startswith("image/")
        if include_outputs and is_image and size <= IMAGE_INLINE_CAP and images < IMAGES_INLINE_MAX:
            plan.append((f, "image", 0))
            images += 1
        elif include_outputs and is_text(f) and text_budget > 0:
            cap = min(TEXT_PREVIEW_CAP, text_budget)
            plan.append((f, "text", cap))
            text_budget -= min(size, cap)
        else:
            plan.append((f, None, 0))
    fetched = await asyncio.gather(
        *(api.file_content(f.id) for f, how, _ in plan if how),
        views.action_items(api, run),
    )
    datas = iter(fetched[:-1])
    outputs: list[OutputFile] = []
    previews: list[ContentBlock | None] = []
    for f, how, cap in plan:
        preview = _preview(f, next(datas)[0], cap, how) if how else None
        previews.append(preview)
        outputs.append(views.output_file(run.id, f, inline=preview is not None))
    in_flow = run.flow_id is not None
    view = RunView.model_validate(
        {
            **run.model_dump(),
            "run_id": run.id,
            "finished": finished,
            "console_url": run_page(console, run.id),
            "approved_by": run.approval.by if run.approval else None,
            "rejection_reason": run.rejection.reason if run.rejection else None,
            "result": views.result_of(run),
            "output_files": outputs,
            "action_items": fetched[-1],
            "can_revise": status in RETRYABLE and run.attempt < run.max_attempts and not in_flow,
            "status_changes": changes,
            "waited_seconds": round(waited, 2),
        }
    )
    return render.run_result(view, previews)


def _preview(f: DriveFileInfo, data: bytes, cap: int, how: str) -> ContentBlock | None:
    """An output file returned inline: an image as itself (PNG and JPEG only), text up to `cap` bytes."""
    if how == "image":
        mime = mime_for(f.name, data)
        if mime in ("image/png", "image/jpeg"):
            return ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=mime)
        return None
    size = int(f.size or 0)
    header = f"{f.name} ({size:,} bytes" + (f", first {cap:,} shown" if len(data) > cap else "") + "):"
    return TextContent(text=f"{header}\n{data[:cap].decode('utf-8', errors='replace')}")
