"""The flow tools: propose_flow (several runs a person approves at once) and get_flow."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from backend.flows.schemas import FlowDetail
from backend.flows.status import FlowStatus
from backend.mcp.api import CleanroomApi
from backend.mcp.tools import render, views
from backend.mcp.tools.common import (
    FINAL,
    FLOW_FINAL,
    PROPOSES,
    READONLY,
    Setup,
    flow_page,
    limits_body,
    new_conversation,
    tool_errors,
)
from backend.mcp.tools.models import (
    ConversationId,
    FlowProposal,
    FlowStepInput,
    FlowStepProposal,
    FlowView,
    Plan,
    Title,
    WaitSeconds,
)
from backend.mcp.tools.waiting import seen_flow, wait


def register(mcp: MCPServer, setup: Setup) -> None:
    connect, console = setup.connect, setup.console

    @mcp.tool(annotations=PROPOSES)
    async def propose_flow(
        ctx: Context,
        title: Title,
        plan: Plan,
        steps: Annotated[
            list[FlowStepInput],
            Field(
                description="the steps in the order they run, at most 10; each runs in its own fresh VM only "
                "after the one before it succeeded"
            ),
        ],
        conversation_id: ConversationId = None,
    ) -> Annotated[CallToolResult, FlowProposal]:
        """Propose several runs together as one flow, e.g. compute, then propose changes from the result. The
        server checks every step and stages each step's data on its own (nothing is kept if any step is
        refused); the flow then WAITS for the person's approval of all its steps at once in the console (the
        result carries the link: tell the user). Step k gets, read-only under /work/flow/, every earlier step's
        /work/output/conclusion.json (a small JSON document) as step-<j>/conclusion.json and the output files
        it `receives` as step-<j>/<name>; never an earlier step's inputs. Returns the flow id and per step its
        capability, staged data, warnings about instruction-like text and hashes. Then call get_flow with
        wait_seconds."""
        with tool_errors("propose_flow"):
            body = {
                "conversation_id": conversation_id or new_conversation(),
                "title": title,
                "plan": plan,
                "steps": [_step_body(step) for step in steps],
            }
            flow = await connect(ctx).propose_flow(body)
            return render.flow_proposal_result(_flow_proposal(flow, console))

    @mcp.tool(annotations=READONLY)
    async def get_flow(
        ctx: Context,
        flow_id: Annotated[int, Field(ge=1, description="the flow id returned by propose_flow")],
        wait_seconds: WaitSeconds = 0,
        until: Annotated[
            Literal["finished", "change"],
            Field(
                description="'finished': return when the flow ends; 'change': at the next status change of "
                "the flow or one of its steps"
            ),
        ] = "finished",
    ) -> Annotated[CallToolResult, FlowView]:
        """A flow's status and each step's: its conclusion, printed output, output files (resource links; get_run
        with the step's run id returns its charts and tables inline), proposed changes, and why a step failed
        or was skipped; credits_total is every step's charge. Flow statuses: awaiting_approval → running →
        succeeded | failed, or rejected; a step waits for the steps before it, and a step that does not succeed
        skips the rest. Progress notifications say e.g. "step 2/3 running". Still waiting or running after
        wait_seconds? Call again; the flow continues whether or not you wait."""
        with tool_errors("get_flow"):
            api = connect(ctx)
            started = time.monotonic()
            flow = await api.flow(flow_id)
            changes: list[str] = []
            if wait_seconds and flow.status not in FLOW_FINAL:
                waiting = api = api.fresh()  # a wait outlives this request: every poll checks the token again

                async def fetch(_ask: int | None, _seen: str | None) -> FlowDetail:
                    return await waiting.flow(flow_id)

                flow, changes = await wait(ctx, fetch, flow, seen_flow, wait_seconds, until)
            view = await _flow_view(api, flow, console, changes, time.monotonic() - started)
            return render.flow_result(view, console)


def _step_body(step: FlowStepInput) -> dict[str, Any]:
    """One step of `POST /api/flows` (the API's StepBody)."""
    body = step.model_dump(mode="json", exclude={"limits"})
    if limits_body(step.limits):
        body["limits"] = limits_body(step.limits)
    return body


def _flow_proposal(flow: FlowDetail, console_url: str) -> FlowProposal:
    url = flow_page(console_url, flow.id)
    needs = flow.status == FlowStatus.awaiting_approval
    steps = [
        FlowStepProposal(
            step=s.step,
            title=s.title,
            capability=s.capability,
            receives=list(s.receives),
            run_id=s.run.id,
            status=s.run.status,
            manifest=views.staged(s.run),
            manifest_errors=views.manifest_errors(s.run),
            findings=views.findings(s.run),
            code_sha256=s.run.code_sha256,
            bundle_sha256=s.run.bundle_sha256,
        )
        for s in flow.steps
    ]
    n = len(steps)
    if needs:
        message = (
            f"Flow {flow.id} “{flow.title}” ({n} step{'s' if n != 1 else ''}) waits for the person's "
            f"approval: ask them to review it at {url}. They approve every step at once (you cannot approve "
            "it); then each step runs in its own fresh VM after the one before it succeeded, and a step that "
            "does not succeed stops the flow. Follow it with get_flow and wait_seconds."
        )
    else:
        message = f"Flow {flow.id} is {flow.status}."
    message += render.data_notes(
        [f for s in steps for f in s.findings], [f for s in steps for f in s.manifest]
    )
    return FlowProposal(
        flow_id=flow.id,
        title=flow.title,
        status=flow.status,
        conversation_id=flow.conversation_id or "",
        console_url=url,
        needs_approval=needs,
        flow_sha256=flow.flow_sha256 or "",
        steps=steps,
        message=message,
    )


async def _flow_view(
    api: CleanroomApi, flow: FlowDetail, console: str, changes: list[str], waited: float
) -> FlowView:
    """The flow as the API shows it, each step with its run's state, outputs and proposed changes."""
    items = await asyncio.gather(*(views.action_items(api, s.run) for s in flow.steps))
    steps = []
    for s, step_items in zip(flow.steps, items, strict=True):
        run = s.run
        finished = run.status in FINAL
        steps.append(
            {
                **s.model_dump(),
                "run_id": run.id,
                "status": run.status,
                "finished": finished,
                "result": views.result_of(run),
                "error_message": run.error_message,
                "output_files": [views.output_file(run.id, f) for f in run.output_files] if finished else [],
                "action_items": step_items,
                "actions_note": run.actions_note,
                "credits_charged": run.credits_charged,
            }
        )
    return FlowView.model_validate(
        {
            **flow.model_dump(),
            "flow_id": flow.id,
            "finished": flow.status in FLOW_FINAL,
            "console_url": flow_page(console, flow.id),
            "approved_by": flow.approval.by if flow.approval else None,
            "rejection_reason": flow.rejection.reason if flow.rejection else None,
            "steps": steps,
            "status_changes": changes,
            "waited_seconds": round(waited, 2),
        }
    )
