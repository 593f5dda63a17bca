"""Flows: several steps the assistant proposed together, each a run in a fresh VM. The list, and one flow:
its approval screen (every step in full, approved or rejected at once) and afterwards what each step did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.flows.schemas import CarriedFile, FlowDetail, FlowPage, FlowStep, FlowSummary, Received
from backend.flows.status import Capability, FlowStatus
from backend.runs.status import RunStatus
from backend.staging.manifest import Manifest
from console import session, theme, widgets
from console.api import Api, ApiError
from console.widgets import FAILED, section

FLOW_STATUSES = [
    FlowStatus.awaiting_approval,
    FlowStatus.running,
    FlowStatus.succeeded,
    FlowStatus.failed,
    FlowStatus.rejected,
]


@dataclass(frozen=True)
class CapabilityLook:
    """How a step's capability is shown: a step that may propose writes looks like the warning it is."""

    icon: str
    color: str
    text_color: str
    meaning: str


CAPABILITIES: dict[str, CapabilityLook] = {
    Capability.read: CapabilityLook(
        "visibility", "blue-grey-2", "blue-grey-10", "Reads only: its actions.json is discarded unread."
    ),
    Capability.propose_writes: CapabilityLook(
        "warning",
        "orange-9",
        "white",
        "May propose changes to records: each becomes an action item that a person accepts or rejects.",
    ),
}
UNKNOWN_CAPABILITY = CapabilityLook("help", "grey-4", "black", "A capability this console does not know.")


def register() -> None:
    @ui.page("/flows")
    async def flows_page(status: str | None = None) -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/flows"):
            return redirect
        admin = session.sees_company_history()  # an admin's or an auditor's view: every flow of the company
        with theme.frame("Flows" if admin else "My flows"):
            with ui.row().classes("items-end gap-3 w-full").mark("filters"):
                status_select = (
                    ui.select(
                        {"": "any status", **{s: s.replace("_", " ") for s in FLOW_STATUSES}},
                        value=status if status in FLOW_STATUSES else "",
                        label="Status",
                    )
                    .props("dense outlined")
                    .classes("w-48")
                    .mark("f-status")
                )
                ui.button("Apply", icon="filter_alt", on_click=lambda: listing.load()).mark("apply-filters")
            results = ui.column().classes("w-full")
        listing = FlowList(results, status_select, session.api())
        await ui.context.client.connected()
        await listing.load()
        return None

    @ui.page("/flows/{flow_id}")
    async def flow_page(flow_id: int) -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out(f"/flows/{flow_id}"):
            return redirect
        with theme.frame(f"Flow #{flow_id}"):
            body = ui.column().classes("w-full gap-4")
            with body:
                widgets.loading("Loading the flow…")
            view = FlowView(flow_id, body, session.api())
            ui.timer(2.0, view.poll)  # outside the body, so re-rendering never deletes the running timer
        await ui.context.client.connected()
        await view.load()
        return None


def capability_chip(capability: str) -> ui.chip:
    look = CAPABILITIES.get(capability, UNKNOWN_CAPABILITY)
    chip = ui.chip(capability, icon=look.icon, color=look.color, text_color=look.text_color)
    with chip.mark(f"capability capability-{capability}"):
        ui.tooltip(look.meaning)
    return chip


def flow_title(flow: FlowSummary | FlowDetail) -> str:
    """The assistant's title with bidi overrides and invisible characters shown (as for runs)."""
    return widgets.reveal_invisible(flow.title or f"Flow #{flow.id}")


# ------------------------------------------------------------------------------------------------- the list

COLUMNS = [
    {"name": "id", "label": "#", "field": "id", "align": "right", "sortable": True},
    {"name": "title", "label": "Title", "field": "title", "align": "left"},
    {"name": "status", "label": "Status", "field": "status", "align": "left", "sortable": True},
    {"name": "steps", "label": "Steps", "field": "steps", "align": "left"},
    {"name": "requested_by", "label": "Requested by", "field": "requested_by", "align": "left"},
    {"name": "created_at", "label": "Proposed", "field": "created_at", "align": "left", "sortable": True},
    {"name": "finished_at", "label": "Finished", "field": "finished_at", "align": "left"},
    {"name": "credits", "label": "Credits", "field": "credits", "align": "right"},
]
TITLE_SLOT = r"""
<q-td :props="props"><a :href="'/flows/' + props.row.id" class="text-primary">{{ props.value }}</a></q-td>
"""
STATUS_SLOT = r"""
<q-td :props="props"><q-badge :color="props.row.status_color">{{ props.value }}</q-badge></q-td>
"""
STEPS_SLOT = r"""
<q-td :props="props">
  <q-badge v-for="s in props.row.step_badges" :key="s.step" :color="s.color" class="q-mr-xs">
    {{ s.step }} · {{ s.label }}
  </q-badge>
</q-td>
"""


def table_rows(items: list[FlowSummary]) -> list[dict[str, Any]]:
    """The flows as the table's rows (dicts the table shows, not the API's JSON)."""
    rows = []
    for flow in items:
        statuses = flow.step_statuses
        rows.append(
            {
                "id": flow.id,
                "title": flow_title(flow),
                "status": flow.status.replace("_", " "),
                "status_color": widgets.STATUS_COLORS.get(flow.status, "grey"),
                "steps": " · ".join(s.replace("_", " ") for s in statuses) or str(flow.step_count),
                "step_badges": [
                    {"step": k, "label": s.replace("_", " "), "color": widgets.STATUS_COLORS.get(s, "grey")}
                    for k, s in enumerate(statuses, start=1)
                ],
                "requested_by": flow.requested_by.email,
                "created_at": widgets.when(flow.created_at),
                "finished_at": widgets.when(flow.finished_at) if flow.finished_at else "",
                "credits": widgets.number(flow.credits_total) if flow.credits_total else "",
            }
        )
    return rows


class FlowList:
    def __init__(self, container: ui.element, status: ui.select, api: Api) -> None:
        self.container = container
        self.status = status
        self.api = api

    async def load(self) -> None:
        await widgets.load_into(self.container, self.fetch, self.render, "Loading flows…")

    async def fetch(self) -> FlowPage | None:
        """None: absent, as runs are, while assistant writes are off (the API answers 404)."""
        try:
            return await self.api.flows(status=self.status.value or None, limit=200)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def render(self, body: FlowPage | None) -> None:
        if body is None:
            widgets.empty_state(widgets.FEATURE_OFF, "block")
            return
        items = body.items
        if not items:
            widgets.empty_state(
                "No flows match this filter."
                if self.status.value
                else "No flows yet. A flow appears here when the assistant proposes several steps together.",
                "account_tree",
            )
            return
        waiting = [f for f in items if f.status == FlowStatus.awaiting_approval]
        if waiting and not self.status.value:
            with ui.row().classes("items-center gap-2 bg-orange-1 rounded px-3 py-2 w-full").mark("waiting"):
                ui.icon("pending_actions", color="warning")
                ui.label(f"{len(waiting)} flow(s) wait for approval:")
                for flow in waiting[:5]:
                    ui.link(flow_title(flow), f"/flows/{flow.id}")
        ui.label(f"{body.total} flow(s)").classes("text-grey-7 text-sm").mark("flow-count")
        table = ui.table(rows=table_rows(items), columns=COLUMNS, row_key="id", pagination=25)
        table.props("flat bordered wrap-cells").classes("w-full cr-clickable").mark("flows-table")
        table.add_slot("body-cell-title", TITLE_SLOT)
        table.add_slot("body-cell-status", STATUS_SLOT)
        table.add_slot("body-cell-steps", STEPS_SLOT)
        table.on("rowClick", lambda e: ui.navigate.to(f"/flows/{e.args[1]['id']}"))


# ----------------------------------------------------------------------------------------------- one flow


def approval_hashes(flow: FlowDetail) -> list[dict[str, str | None]]:
    """Every step's code and data hashes as the page shows them, in step order: what an approval binds."""
    return [
        {"code_sha256": step.run.code_sha256, "bundle_sha256": widgets.bundle_hash(step.run)}
        for step in flow.steps
    ]


def progress_key(flow: FlowDetail) -> tuple[str, ...]:
    """What changes while a flow runs: its status and each step's."""
    return (flow.status, *(step.run.status for step in flow.steps))


def received_text(receives: list[Received]) -> str:
    names = ", ".join(f"step {r.step}'s {r.name}" for r in receives)
    return widgets.reveal_invisible(names)


def carried_text(carried: CarriedFile) -> str:
    """A file a step was handed at its start: name, size and the start of its sha256."""
    size = widgets.human_bytes(carried.size)
    return f"{widgets.reveal_invisible(carried.name)} ({size}, sha256 {carried.sha256[:12]})"


class FlowView(widgets.LoadedView[FlowDetail]):
    text = "Loading the flow…"

    def __init__(self, flow_id: int, body: ui.column, api: Api) -> None:
        super().__init__(body, api)
        self.flow_id = flow_id
        self.flow: FlowDetail | None = None

    async def fetch(self) -> FlowDetail:
        return await self.api.flow(self.flow_id)

    def moving(self, flow: FlowDetail) -> bool:
        """While the flow runs, re-render once it or one of its steps changes status."""
        return flow.status == FlowStatus.running

    def differs(self, shown: FlowDetail, fresh: FlowDetail) -> bool:
        return progress_key(fresh) != progress_key(shown)

    async def render(self, flow: FlowDetail) -> None:
        self.flow = flow
        self.header(flow)
        with section("Plan", "description", "plan"):
            if flow.plan:
                ui.label(widgets.reveal_invisible(flow.plan)).classes("whitespace-pre-wrap")
            else:
                ui.label("The assistant gave no plan.").classes("text-grey-7")
        await self.steps(flow)
        self.decision(flow)
        audit = section("Audit entries for this flow", "fact_check", "flow-audit")
        with audit:
            entries = ui.column().classes("w-full")
        await widgets.load_into(entries, lambda: self.api.flow_audit(self.flow_id), widgets.audit_table)

    def header(self, flow: FlowDetail) -> None:
        with ui.card().classes("w-full").mark("flow-header"):
            with ui.row().classes("items-center gap-3"):
                ui.label(flow_title(flow)).classes("text-xl font-semibold").mark("flow-title")
                widgets.status_badge(flow.status).mark("flow-status")
                ui.label(f"{len(flow.steps)} steps, one fresh VM each").classes("text-grey-7")
            requester = flow.requested_by
            with ui.row().classes("gap-6 text-sm text-grey-8"):
                ui.label(f"requested by {requester.name} <{requester.email}>")
                ui.label(f"proposed {widgets.when(flow.created_at)}")
                if flow.finished_at:
                    ui.label(f"finished {widgets.when(flow.finished_at)}")
                if flow.conversation_id:
                    ui.label(f"conversation {flow.conversation_id}")
                if flow.schedule_id:
                    ui.label(f"fired by schedule #{flow.schedule_id}")
                ui.label(f"credits: {widgets.number(flow.credits_total)}").mark("flow-credits")
                ui.label(f"action items: {flow.action_items_count} of at most {flow.action_cap}").mark(
                    "flow-action-cap"
                )
            ui.label(f"flow sha256 {flow.flow_sha256}").classes("text-xs text-grey-7 font-mono")
            if flow.status == FlowStatus.awaiting_approval:
                self.review_summary(flow)

    def review_summary(self, flow: FlowDetail) -> None:
        """What to look at before deciding, over every step; each is shown in full below."""
        runs = [step.run for step in flow.steps]
        writers = [s for s in flow.steps if s.capability == Capability.propose_writes]
        findings = sum(len(r.findings) for r in runs)
        truncated = [
            row
            for r in runs
            for row in widgets.manifest_rows(Manifest.of(r.manifest))
            if row["truncated"] != "no"
        ]
        with ui.row().classes("items-center gap-2").mark("review-summary"):
            ui.label("Before you decide:").classes("text-sm text-grey-8")
            if writers:
                steps = ", ".join(str(s.step) for s in writers)
                ui.chip(f"step(s) {steps} may propose writes", icon="warning", color="orange-2")
            if findings:
                ui.chip(f"{findings} injection warning(s)", icon="warning", color="orange-2")
            if truncated:
                ui.chip(f"{len(truncated)} input(s) truncated", icon="content_cut", color="amber-2")
            if any(widgets.code_findings(r) for r in runs):
                ui.chip("invisible characters in the code", icon="visibility", color="red-2")
            for step in flow.steps:
                widgets.wide_line_chips(step.run.code or "", where=f"step {step.step}: ")
            lines = sum(widgets.code_lines(r.code or "") for r in runs)
            ui.chip(f"{len(runs)} steps, {lines} lines of code", icon="code", color="grey-3")

    async def steps(self, flow: FlowDetail) -> None:
        with section("Steps, in the order they run", "account_tree", "steps"):
            ui.label(
                "Each step runs in a fresh VM only after the one before it succeeded. It sees its own staged "
                "data, and, read-only, every earlier step's conclusion.json and the outputs it receives."
            ).classes("text-sm text-grey-7")
            with ui.timeline(side="right").classes("w-full").mark("timeline"):
                for step in flow.steps:
                    await self.step(flow, step)

    async def step(self, flow: FlowDetail, step: FlowStep) -> None:
        run, k = step.run, step.step
        color = widgets.STATUS_COLORS.get(run.status, "grey")
        icon = CAPABILITIES.get(step.capability, UNKNOWN_CAPABILITY).icon
        entry = ui.timeline_entry(icon=icon, color=color).classes("w-full").mark(f"step step-{k}")
        with entry, ui.column().classes("w-full gap-2"):
            with ui.row().classes("items-center gap-3"):
                ui.label(f"Step {k}: {widgets.run_title(run)}").classes("text-lg font-medium").mark(
                    "step-title"
                )
                capability_chip(step.capability)
                widgets.status_badge(run.status).mark("step-status")
                ui.link(f"run #{run.id}", f"/runs/{run.id}").mark("step-run-link")
            if step.capability == Capability.propose_writes:
                ui.label(CAPABILITIES[Capability.propose_writes].meaning).classes(
                    "text-sm text-warning"
                ).mark("writes-note")
            self.receives(step)
            if run.status not in (RunStatus.awaiting_approval, RunStatus.rejected):
                await self.step_outcome(step)
                widgets.output_findings_section(run)
            awaiting = flow.status == FlowStatus.awaiting_approval
            # the approval screen shows all of it; afterwards it is one click away (and on the run's page)
            review = ui.expansion("Staged data, code and warnings", icon="code", value=awaiting)
            with review.classes("w-full").props("dense").mark("step-review"):
                widgets.manifest_section(run, "Data staged for this step")
                widgets.code_section(run)
                widgets.findings_section(run)

    def receives(self, step: FlowStep) -> None:
        with ui.column().classes("gap-0 text-sm text-grey-8").mark("receives"):
            if step.step == 1:
                ui.label("Receives nothing from other steps: it is the first.")
                return
            named = step.receives
            ui.label(
                "Receives every earlier step's conclusion.json"
                + (f", and {received_text(named)}" if named else "; no other outputs")
                + " (read-only at /work/flow/)."
            )
            carried = step.carried
            if carried:
                handed = ", ".join(carried_text(c) for c in carried)
                ui.label(f"Was handed at its start: {handed}").mark("carried")
            elif carried is not None:
                ui.label("Was handed nothing at its start.").mark("carried")

    async def step_outcome(self, step: FlowStep) -> None:
        """What the step did: status and timings, its error or why it was skipped, its printed output, its
        conclusion and its output files."""
        run = step.run
        result = run.result
        with ui.column().classes("w-full gap-2").mark("step-outcome"):
            with ui.row().classes("items-center gap-6 text-sm text-grey-8"):
                if run.started_at:
                    ui.label(f"started {widgets.when(run.started_at)}")
                if run.finished_at:
                    ui.label(f"ended {widgets.when(run.finished_at)}")
                if took := widgets.timings_text(run):
                    ui.label(took).mark("step-timings")
                if run.credits_charged is not None:
                    ui.label(f"credits charged: {widgets.number(run.credits_charged)}")
                if run.action_items_count:
                    ui.link(f"{run.action_items_count} proposed change(s)", f"/runs/{run.id}")
            if run.status in widgets.ACTIVE_STATUSES:
                waiting = "waits for the steps before it" if run.status == RunStatus.waiting else run.status
                widgets.loading(f"This step {waiting}; this page updates by itself…")
            if run.error_message or (result and result.error):
                widgets.error_box(str(run.error_message or (result and result.error)))
            if run.actions_note:
                ui.label(str(run.actions_note)).classes("text-grey-8").mark("actions-note")
            if result:
                widgets.printed_output(result)
            if step.conclusion is not None:
                ui.label("Conclusion (conclusion.json, handed to the later steps)").classes("font-medium")
                widgets.pre(widgets.pretty_json(step.conclusion)).mark("conclusion")
            await widgets.outputs_section(run, self.api)

    def decision(self, flow: FlowDetail) -> None:
        if flow.status == FlowStatus.awaiting_approval:
            with ui.card().classes("w-full gap-2").mark("decision"):
                if not flow.can_decide:
                    ui.label(
                        "Waiting for the person who asked for this flow to approve or reject it."
                    ).classes("text-grey-8")
                    return
                count = len(flow.steps)
                with ui.row().classes("items-center gap-3"):
                    approve = ui.button(f"Approve all {count} steps and run", icon="play_arrow")
                    approve.props("color=positive").mark("approve")
                    approve.on_click(lambda: self.approve(approve))
                    ui.button("Reject", icon="block", on_click=self.ask_reject_reason).props(
                        "outline color=negative"
                    ).mark("reject")
                    if blocked := flow.approve_blocked_reason:
                        approve.disable()
                        with ui.row().classes("items-center gap-1 text-negative").mark("approve-blocked"):
                            ui.icon("lock")
                            ui.label(f"Approve is not possible: {blocked}")
                ui.label(
                    "Approving binds every step to its exact code and staged inputs (the sha256 shown with "
                    "each); a change to any step refuses the approval, and no step can be approved alone."
                ).classes("text-xs text-grey-7")
        if approval := flow.approval:
            with ui.row().classes("items-center gap-2 text-positive").mark("approval"):
                ui.icon("task_alt")
                ui.label(f"Approved by {approval.by} at {widgets.when(approval.at)}")
                ui.label(f"flow {str(flow.flow_sha256)[:12]}")
        if rejection := flow.rejection:
            with ui.row().classes("items-center gap-2 text-grey-8").mark("rejection"):
                ui.icon("block")
                reason = f": {rejection.reason}" if rejection.reason else ""
                ui.label(f"Rejected by {rejection.by} at {widgets.when(rejection.at)}{reason}")

    async def approve(self, button: ui.button) -> None:
        if self.flow is None:
            return
        button.props("loading")
        button.disable()  # one click, one approval
        # the hashes of the flow as rendered, not as fetched again: approve what the person saw
        result = await widgets.call(self.api.approve_flow(self.flow_id, approval_hashes(self.flow)))
        if result is FAILED:
            button.props(remove="loading")
            button.enable()
        else:
            ui.notify(
                "Approved: step 1 is queued; each later step waits for the one before.", type="positive"
            )
            await self.load()

    def ask_reject_reason(self) -> None:
        widgets.reason_dialog(
            "Reject this flow (every step)",
            field="Reason (shown to the assistant)",
            button="Reject",
            mark="reject",
            send=lambda reason: self.api.reject_flow(self.flow_id, reason),
            done="Rejected.",
            after=self.load,
        )
