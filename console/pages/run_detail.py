"""One run: the approval screen while it waits, and afterwards everything it did."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.actions.schemas import ActionItemInfo
from backend.actions.status import ItemStatus
from backend.credits.schemas import ApprovalCost
from backend.evidence.schemas import Rerun, RerunOutcome
from backend.evidence.schemas import Reruns as RerunOverview
from backend.evidence.status import IN_FLIGHT as RERUN_IN_FLIGHT
from backend.injection.schemas import Finding
from backend.runs.schemas import FollowupGrant, GrantOffer, RunDetail
from backend.runs.status import RunStatus
from backend.staging.manifest import Manifest
from backend.system_schemas import GuestEnvironment
from console import session, theme, widgets
from console.api import Api
from console.widgets import FAILED, section


def register() -> None:
    @ui.page("/runs/{run_id}")
    async def run_page(run_id: int) -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out(f"/runs/{run_id}"):
            return redirect
        with theme.frame(f"Run #{run_id}"):
            body = ui.column().classes("w-full gap-4")
            with body:
                widgets.loading("Loading the run…")
            view = RunView(run_id, body, session.api())
            ui.timer(2.0, view.poll)  # outside the body, so re-rendering never deletes the running timer
        await ui.context.client.connected()
        await view.load()
        return None


def flow_step_text(run: RunDetail) -> str:
    return f"step {run.flow_step} of flow {run.flow_id}"


def grant_scope(grant: FollowupGrant | GrantOffer) -> str:
    """What a follow-up grant lets follow-ups read, in words: its datasets and files."""
    parts = [f"dataset {d}" for d in grant.datasets]
    files = [(f.name, f.id) for f in grant.files] or [(None, i) for i in grant.file_ids]
    for name, file_id in files:
        parts.append(f"file {name} (#{file_id})" if name else f"file #{file_id}")
    return ", ".join(widgets.reveal_invisible(p) for p in parts) or "no data at all"


LIMIT_WORDS = {"per_person": "a person this period", "per_day": "a day for the company"}


def approval_cost(cost: ApprovalCost | None) -> None:
    """The run's maximum cost (what approving it reserves, as the API prices it) beside what is left of the
    pool and, when it is tighter, of a company admin's limit."""
    if not cost:
        return
    covered = cost.covered
    with ui.row().classes("items-center gap-2").mark("approval-cost"):
        ui.icon("toll", color="primary" if covered else "negative")
        ui.label(
            f"Maximum cost {widgets.number(cost.max_cost)} credits (its limits at their whole wall "
            "time; approving it reserves that much until it ends, and it is charged what it uses)"
        ).mark("max-cost")
        held = f", {widgets.number(cost.reserved)} held by approved runs" if cost.reserved else ""
        ui.label(
            f"· {widgets.number(cost.pool_left)} of {widgets.number(cost.pool)} credits left in "
            f"the pool{held}"
        ).classes("text-grey-8").mark("pool-left")
        limit = cost.limit
        if limit:
            words = LIMIT_WORDS.get(limit.kind, limit.kind)
            ui.label(
                f"· {widgets.number(limit.left)} left of the limit of {widgets.number(limit.limit)} "
                f"credits {words}, the tighter"
            ).classes("text-grey-8").mark("limit-left")
    if not covered:
        with ui.row().classes("items-center gap-2 text-negative").mark("cost-not-covered"):
            ui.icon("block")
            ui.label(
                f"That is more than the {widgets.number(cost.left)} credits left: approving it will be "
                "refused. Ask for lower limits, or ask an admin or the operator for more credits."
            )


class RunView:
    def __init__(self, run_id: int, body: ui.column, api: Api) -> None:
        self.run_id = run_id
        self.body = body
        self.api = api  # taken while the page is built: timers and handlers run outside its request
        self.loading = False
        self.run: RunDetail | None = None

    async def load(self) -> None:
        self.loading = True
        try:
            await widgets.load_into(
                self.body, lambda: self.api.run(self.run_id), self.render, "Loading the run…"
            )
        finally:
            self.loading = False

    async def render(self, run: RunDetail) -> None:
        self.run = run
        self.header(run)
        guest = None
        if (
            run.status == RunStatus.awaiting_approval
        ):  # what the code will run with, from the image's manifest
            try:
                guest = await self.api.sandbox_environment()
            except Exception:  # noqa: BLE001 - the page stands without it
                guest = None
        self.plan(run, guest)
        widgets.manifest_section(run)
        if run.diff:
            with section("Changes since the previous attempt", "difference", "diff-section"):
                widgets.diff_block(run.diff)
        widgets.code_section(run)
        widgets.findings_section(run, self.ask_acknowledge_reason if session.is_admin() else None)
        self.decision(run)
        undecided = (RunStatus.awaiting_approval, RunStatus.rejected)
        if run.result or run.error_message or run.status not in undecided:
            self.outcome(run)
            widgets.output_findings_section(run)
            await widgets.outputs_section(run, self.api)
        if run.action_items_count or run.actions_discarded or run.actions_note:
            actions = section("Proposed actions", "edit_note", "actions-section")
            await ActionItems(self.run_id, actions, self.api).load()
        if session.sees_company_history() and run.status not in undecided:
            reruns = section("Re-run for evidence", "replay", "reruns-section")
            await Reruns(self.run_id, reruns, self.api).load()
        audit = section("Audit entries for this run", "fact_check", "run-audit")
        with audit:
            entries = ui.column().classes("w-full")
        await widgets.load_into(entries, lambda: self.api.run_audit(self.run_id), widgets.audit_table)

    async def poll(self) -> None:
        """While the run is queued or running, re-render once its status changes."""
        if self.loading or self.run is None or self.run.status not in widgets.ACTIVE_STATUSES:
            return
        try:
            fresh = await self.api.run(self.run_id)
        except Exception:  # noqa: BLE001 - keep polling through a blip
            return
        if fresh.status != self.run.status:
            await self.load()

    def header(self, run: RunDetail) -> None:
        with ui.card().classes("w-full").mark("run-header"):
            with ui.row().classes("items-center gap-3"):
                ui.label(widgets.run_title(run)).classes("text-xl font-semibold").mark("run-title")
                widgets.status_badge(run.status).mark("run-status")
                ui.label(f"attempt {run.attempt} of {run.max_attempts}").classes("text-grey-7")
            requester = run.requested_by
            with ui.row().classes("gap-6 text-sm text-grey-8"):
                ui.label(f"requested by {requester.name} <{requester.email}>")
                ui.label(f"proposed {widgets.when(run.created_at)}")
                if run.conversation_id:
                    ui.label(f"conversation {run.conversation_id}")
                if run.previous_attempt_id:
                    ui.link(
                        f"previous attempt #{run.previous_attempt_id}",
                        f"/runs/{run.previous_attempt_id}",
                    )
                if run.narrowed_from:
                    ui.link(
                        f"runs without a second approval: its inputs narrow run #{run.narrowed_from}",
                        f"/runs/{run.narrowed_from}",
                    )
                if run.schedule_id:
                    ui.label(f"fired by schedule #{run.schedule_id}")
                if run.flow_id:
                    ui.link(flow_step_text(run), f"/flows/{run.flow_id}").mark("flow-link")
            if run.narrowed_from:
                with ui.row().classes("items-center gap-2 text-warning").mark("unreviewed-run"):
                    ui.icon("visibility_off")
                    ui.label(
                        "No person reviewed this code: it ran as a follow-up under the grant of "
                        f"run #{run.narrowed_from}. Check its proposed changes with that in mind."
                    )
            if run.status == RunStatus.awaiting_approval and run.followup_note:
                with ui.row().classes("items-center gap-2 text-grey-8").mark("followup-note"):
                    ui.icon("info")
                    ui.label(f"Asked as a follow-up, but it needs your approval: {run.followup_note}")
            if run.status == RunStatus.awaiting_approval:
                self.review_summary(run)

    def review_summary(self, run: RunDetail) -> None:
        """What to look at before deciding, in one line at the top; each item is shown in full below."""
        findings = run.findings
        rows = widgets.manifest_rows(Manifest.of(run.manifest))
        truncated = [r for r in rows if r["truncated"] != "no"]
        with ui.row().classes("items-center gap-2").mark("review-summary"):
            ui.label("Before you decide:").classes("text-sm text-grey-8")
            if findings:
                ui.chip(f"{len(findings)} injection warning(s)", icon="warning", color="orange-2")
            if truncated:
                ui.chip(f"{len(truncated)} input(s) truncated", icon="content_cut", color="amber-2")
            if run.diff:
                ui.chip("revision: changes shown", icon="difference", color="blue-1")
            if widgets.code_findings(run):
                ui.chip("invisible characters in the code", icon="visibility", color="red-2")
            widgets.wide_line_chips(run.code or "")
            ui.chip(f"{widgets.code_lines(run.code or '')} lines of code", icon="code", color="grey-3")

    def plan(self, run: RunDetail, guest: GuestEnvironment | None = None) -> None:
        with section("Plan", "description", "plan"):
            if run.plan:
                ui.label(widgets.reveal_invisible(run.plan)).classes("whitespace-pre-wrap")
            else:
                ui.label("The assistant gave no plan.").classes("text-grey-7")
            limits = run.limits
            if limits:
                ui.label(
                    f"Limits: {limits.wall_seconds} s wall clock, {limits.memory_mib} MiB memory, "
                    f"{limits.vcpus} vCPUs; no network."
                ).classes("text-sm text-grey-7")
            if guest:
                offered = ", ".join(f"{name} {guest.packages[name]}" for name in guest.offered)
                ui.label(
                    f"Runs with Python {guest.python} and {offered}; nothing else can be installed."
                ).classes("text-sm text-grey-7").mark("guest-environment")

    def decision(self, run: RunDetail) -> None:
        status = run.status
        if status == RunStatus.awaiting_approval:
            with ui.card().classes("w-full gap-2").mark("decision"):
                if run.flow_id:  # the API refuses a step's own approval: it goes with its flow
                    with ui.row().classes("items-center gap-2 text-grey-8").mark("flow-decision"):
                        ui.icon("account_tree")
                        ui.label(
                            f"This run is {flow_step_text(run)}: it is approved or rejected with its flow,"
                        )
                        ui.link("every step at once, on the flow's page.", f"/flows/{run.flow_id}")
                    return
                approval_cost(run.approval_cost)
                if not run.can_decide:
                    ui.label(
                        "Waiting for the person who asked for this run to approve or reject it."
                    ).classes("text-grey-8")
                    return
                blocked = run.approve_blocked_reason
                offer = run.followup_grant_on_approval
                if offer:  # said before the decision: what else this approval lets run unreviewed
                    with ui.row().classes("items-center gap-2 text-warning").mark("followup-grant-offer"):
                        ui.icon("forward_to_inbox")
                        ui.label(
                            "Follow-ups in this conversation may run without another approval until "
                            f"{widgets.when(offer.expires_at)} UTC, reading only a subset of: "
                            f"{grant_scope(offer)} (at most {offer.max_runs} follow-ups)."
                        )
                with ui.row().classes("items-center gap-3"):
                    approve = ui.button("Approve and run", icon="play_arrow").props("color=positive")
                    approve.on_click(lambda: self.approve(approve))
                    approve.mark("approve")
                    ui.button("Reject", icon="block", on_click=self.ask_reject_reason).props(
                        "outline color=negative"
                    ).mark("reject")
                    if blocked:
                        approve.disable()
                        with ui.row().classes("items-center gap-1 text-negative").mark("approve-blocked"):
                            ui.icon("lock")
                            ui.label(f"Approve is not possible: {blocked}")
                ui.label(
                    "Approving binds to this exact code and these exact staged inputs (their sha256); "
                    "any change needs a new approval."
                ).classes("text-xs text-grey-7")
        approval = run.approval
        if approval and approval.by:
            with ui.row().classes("items-center gap-2 text-positive").mark("approval"):
                ui.icon("task_alt")
                ui.label(f"Approved by {approval.by} at {widgets.when(approval.at)}")
                ui.label(f"code {str(approval.code_sha256)[:12]} · data {str(approval.bundle_sha256)[:12]}")
        grant = run.followup_grant
        if grant:
            with ui.row().classes("items-center gap-2 text-grey-8").mark("followup-grant"):
                ui.icon("forward_to_inbox")
                state = "" if grant.active else " (no longer in force)"
                ui.label(
                    f"Follow-up grant{state}: until {widgets.when(grant.expires_at)} UTC, "
                    f"{grant.used} of {grant.max_runs} follow-ups used, reading only a subset of: "
                    f"{grant_scope(grant)}"
                )
        rejection = run.rejection
        if rejection and rejection.by:
            with ui.row().classes("items-center gap-2 text-grey-8").mark("rejection"):
                ui.icon("block")
                reason = f": {rejection.reason}" if rejection.reason else ""
                ui.label(f"Rejected by {rejection.by} at {widgets.when(rejection.at)}{reason}")

    async def approve(self, button: ui.button) -> None:
        run = self.run
        if run is None:
            return
        bundle = widgets.bundle_hash(run)
        button.props("loading")
        button.disable()  # one click, one approval
        result = await widgets.call(self.api.approve(self.run_id, run.code_sha256, bundle))
        if result is FAILED:
            button.props(remove="loading")
            button.enable()
        else:
            ui.notify("Approved: the run is queued.", type="positive")
            await self.load()

    async def ask_acknowledge_reason(self, index: int, finding: Finding) -> None:
        """An admin marks a finding expected here (for this cell in this column, until the cell changes)."""
        with ui.dialog() as dialog, ui.card().classes("w-96"):
            ui.label("Expected here").classes("text-lg")
            ui.label(
                f"{widgets.location(finding)}: this cell will still be shown, marked as acknowledged, on every "
                "run until it changes. The reason is audited."
            ).classes("text-sm")
            reason = ui.textarea("Why is this expected here?").classes("w-full").mark("acknowledge-reason")

            async def confirm() -> None:
                result = await widgets.call(
                    self.api.acknowledge_finding(self.run_id, index, reason.value.strip())
                )
                dialog.close()
                if result is not FAILED:
                    ui.notify("Acknowledged.", type="info")
                    await self.load()

            with ui.row().classes("justify-end w-full"):
                ui.button("Cancel", on_click=dialog.close).props("flat")
                ui.button("Acknowledge", on_click=confirm).props("color=primary").mark("confirm-acknowledge")
        dialog.open()

    def ask_reject_reason(self) -> None:
        with ui.dialog() as dialog, ui.card().classes("w-96"):
            ui.label("Reject this run").classes("text-lg")
            reason = ui.textarea("Reason (shown to the assistant)").classes("w-full").mark("reject-reason")

            async def confirm() -> None:
                result = await widgets.call(self.api.reject(self.run_id, reason.value.strip()))
                dialog.close()
                if result is not FAILED:
                    ui.notify("Rejected.", type="info")
                    await self.load()

            with ui.row().classes("justify-end w-full"):
                ui.button("Cancel", on_click=dialog.close).props("flat")
                ui.button("Reject", on_click=confirm).props("color=negative").mark("confirm-reject")
        dialog.open()

    def outcome(self, run: RunDetail) -> None:
        result = run.result
        with section("Result", "terminal", "result"):
            with ui.row().classes("items-center gap-6"):
                widgets.status_badge(run.status)
                if result and result.exit_code is not None:
                    ui.label(f"exit code {result.exit_code}")
                if took := widgets.timings_text(run):
                    ui.label(took).mark("timings")
                credits = run.credits_charged
                ui.label(f"credits charged: {widgets.number(credits)}").mark("credits-charged")
                if run.host_id:
                    ui.label(f"ran on host {run.host_id}").mark("run-host")
            if run.status in widgets.ACTIVE_STATUSES:
                widgets.loading("The run is " + run.status + "; this page updates by itself…")
            if run.error_message or (result and result.error):
                widgets.error_box(str(run.error_message or (result and result.error)))
            if result:
                widgets.printed_output(result)
                vm = result.vm
                if vm:
                    with ui.card().classes("w-full bg-grey-1").mark("isolation"):
                        ui.label("Isolation evidence").classes("font-medium")
                        if run.host_id:  # a fleet host's account of its own VM: not something the API checked
                            ui.label(
                                f"Reported by host {run.host_id} itself; the service cannot verify it."
                            ).classes("text-grey-8 text-sm").mark("isolation-self-reported")
                        virt = vm.virt_type
                        virt_text = {
                            "kvm": "KVM (hardware virtualization)",
                            "qemu": "software emulation (TCG)",
                        }
                        with ui.grid(columns=2).classes("gap-x-6 gap-y-1 text-sm"):
                            ui.label("virtualization")
                            ui.label(virt_text.get(virt, str(virt)))
                            ui.label("network interfaces in the VM definition")
                            ui.label(str(vm.nics))
                            ui.label("interfaces inside the guest")
                            ui.label(", ".join(vm.guest_interfaces) or "—")
                            ui.label("guest image sha256")
                            ui.label(str(vm.image_hash or "—")[:16]).classes("font-mono")
            if run.actions_discarded:
                who = "This step may only read" if run.flow_id else "This scheduled run may not write"
                ui.label(f"{who}: the actions.json its code produced was discarded unread.").classes(
                    "text-grey-8"
                )
            if run.actions_note:
                ui.label(str(run.actions_note)).classes("text-grey-8")


RERUN_EXPLAINED = (
    "Runs the exact approved code over the exact staged bundle again, in a fresh VM with no network, while the "
    "company keeps the bundle (Settings › Data retention). Its proposed changes are discarded unread, nothing is "
    "filed and no credits are charged. Code that uses the time, random numbers or os.urandom prints and writes "
    "something else each time: a mismatch there is expected."
)


def yes_no(value: Any) -> str:
    return "yes" if value else "no"


class Reruns:
    """A company admin or an auditor re-runs a kept run and sees whether its printed output and each output
    file's sha256 match the original's."""

    def __init__(self, run_id: int, container: ui.element, api: Api) -> None:
        self.run_id = run_id
        self.api = api
        with container:
            ui.label(RERUN_EXPLAINED).classes("text-sm text-grey-7")
            self.list = ui.column().classes("w-full gap-3")
            ui.timer(3.0, self.poll)  # beside the list, so reloading the list never deletes it
        self.in_flight = False
        self.loading = False

    async def load(self) -> None:
        self.loading = True
        try:
            await widgets.load_into(
                self.list, lambda: self.api.reruns(self.run_id), self.render, "Loading re-runs…"
            )
        finally:
            self.loading = False

    async def poll(self) -> None:
        """While a re-run is queued or running, reload until it ends."""
        if self.in_flight and not self.loading:
            await self.load()

    def render(self, overview: RerunOverview) -> None:
        self.in_flight = any(i.status in RERUN_IN_FLIGHT for i in overview.items)
        with ui.row().classes("items-center gap-3"):
            button = ui.button("Re-run for evidence", icon="replay", on_click=lambda: self.start(button))
            button.props("outline").mark("rerun")
            if overview.available:
                ui.label(f"bundle kept until {widgets.when(overview.kept_until)} UTC").classes(
                    "text-sm text-grey-8"
                ).mark("rerun-kept-until")
            else:
                button.disable()
                with ui.row().classes("items-center gap-1 text-grey-8").mark("rerun-unavailable"):
                    ui.icon("lock")
                    ui.label(str(overview.unavailable_reason or "not available"))
            if self.in_flight:
                ui.button("Refresh", icon="refresh", on_click=self.load).props("flat dense").mark(
                    "rerun-refresh"
                )
        for item in overview.items:
            self.item(item)

    def item(self, item: Rerun) -> None:
        with ui.card().classes("w-full gap-2").props("flat bordered").mark(f"rerun rerun-{item.id}"):
            with ui.row().classes("items-center gap-3"):
                ui.label(f"Re-run #{item.id}").classes("font-medium")
                widgets.status_badge(item.status)
                ui.label(
                    f"asked by {item.requested_by} at {widgets.when(item.requested_at)} · not charged"
                ).classes("text-xs text-grey-7")
            if item.error_message:
                widgets.error_box(str(item.error_message))
            comparison = item.comparison
            if not comparison:
                return
            outcome = RerunOutcome.of(item.outcome)
            ok = comparison.all_match
            with ui.row().classes("items-center gap-2 " + ("text-positive" if ok else "text-warning")):
                ui.icon("verified" if ok else "difference")
                ui.label(
                    "Everything matched the original run."
                    if ok
                    else "Not everything matched the original run (see below)."
                ).mark("rerun-verdict")
            with ui.grid(columns=2).classes("gap-x-6 gap-y-1 text-sm"):
                ui.label("printed output matches")
                ui.label(yes_no(comparison.printed_output_match)).mark("rerun-printed-match")
                ui.label("status and exit code match")
                ui.label(yes_no(comparison.status_match and comparison.exit_code_match)).mark(
                    "rerun-status-match"
                )
                ui.label("its proposed changes")
                ui.label("discarded unread" if outcome.actions_discarded else "none written")
                ui.label("network interfaces in the VM definition")
                vm = outcome.vm
                ui.label(str(vm.nics if vm and "nics" in vm.model_fields_set else "?"))
            rows = [
                {
                    "name": widgets.reveal_invisible(f.name),
                    "original": (f.original_sha256 or "— (not written)")[:16],
                    "rerun": (f.rerun_sha256 or "— (not written)")[:16],
                    "match": yes_no(f.match),
                }
                for f in comparison.files
            ]
            if rows:
                ui.table(
                    rows=rows,
                    columns=[
                        {"name": "name", "label": "Output file", "field": "name", "align": "left"},
                        {
                            "name": "original",
                            "label": "Original sha256",
                            "field": "original",
                            "align": "left",
                        },
                        {"name": "rerun", "label": "Re-run sha256", "field": "rerun", "align": "left"},
                        {"name": "match", "label": "Match", "field": "match", "align": "left"},
                    ],
                    row_key="name",
                ).props("dense flat bordered").classes("w-full").mark("rerun-files")

    async def start(self, button: ui.button) -> None:
        button.disable()
        result = await widgets.call(self.api.request_rerun(self.run_id))
        if result is not FAILED:
            ui.notify("Re-run queued: it runs in a fresh VM; refresh to see the comparison.", type="positive")
        await self.load()


class ActionItems:
    """The proposed record changes: before/after per field, accepted or rejected one at a time."""

    def __init__(self, run_id: int, container: ui.element, api: Api) -> None:
        self.run_id = run_id
        self.api = api
        with container:
            self.list = ui.column().classes("w-full gap-3")

    async def load(self) -> None:
        await widgets.load_into(
            self.list,
            lambda: self.api.action_items(self.run_id),
            self.render,
            "Loading proposed actions…",
        )

    def render(self, items: list[ActionItemInfo]) -> None:
        if not items:
            widgets.empty_state("The run proposed no changes.", "edit_off")
            return
        pending = sum(1 for i in items if i.status == ItemStatus.pending)
        ui.label(
            f"{len(items)} proposed change(s), {pending} waiting. Nothing changes until you accept an item."
        ).classes("text-grey-8")
        for item in items:
            self.item(item)

    def item(self, item: ActionItemInfo) -> None:
        status = item.status
        with ui.card().classes("w-full gap-2").props("flat bordered").mark(f"action-item action-{item.id}"):
            with ui.row().classes("items-center gap-3"):
                ui.label(f"#{item.index + 1}").classes("text-grey-7")
                ui.label(
                    f"{item.op} {item.dataset}"
                    + (f" record {item.record_id}" if item.record_id is not None else " (new record)")
                ).classes("font-medium")
                widgets.status_badge(status)
                if item.unreviewed_run:
                    ui.chip("from a run no person reviewed", icon="visibility_off", color="orange-2").mark(
                        f"unreviewed unreviewed-{item.id}"
                    )
                if item.decided_by:
                    ui.label(f"by {item.decided_by} at {widgets.when(item.decided_at)}").classes(
                        "text-xs text-grey-7"
                    )
            if item.reason:
                ui.label(f"Why: {item.reason}").classes("text-sm text-grey-8")
            changes = item.changes or {}
            before = item.before or {}
            rows = [
                {
                    "field": field,
                    "before": "—" if field not in before else _cell(before[field]),
                    "after": _cell(value),
                }
                for field, value in changes.items()
            ]
            if rows:
                ui.table(
                    rows=rows,
                    columns=[
                        {"name": "field", "label": "Field", "field": "field", "align": "left"},
                        {"name": "before", "label": "Before", "field": "before", "align": "left"},
                        {"name": "after", "label": "After", "field": "after", "align": "left"},
                    ],
                    row_key="field",
                ).props("dense flat bordered wrap-cells").classes("w-full").mark("changes-table")
            if item.created_record_id:
                ui.label(f"created record {item.created_record_id}").classes("text-sm text-positive")
            if item.raw is not None and not rows:
                ui.label("As proposed: " + json.dumps(item.raw, default=str)[:500]).classes("cr-pre w-full")
            if item.problem:
                with ui.row().classes("items-center gap-2 text-negative").mark("item-problem"):
                    ui.icon("error")
                    ui.label(str(item.problem))
            if status == ItemStatus.pending:
                with ui.row().classes("gap-2"):
                    ui.button("Accept", icon="check", on_click=lambda i=item: self.accept(i)).props(
                        "color=positive dense"
                    ).mark(f"accept-{item.id}")
                    ui.button("Reject", icon="close", on_click=lambda i=item: self.reject(i)).props(
                        "outline color=negative dense"
                    ).mark(f"reject-{item.id}")

    async def accept(self, item: ActionItemInfo) -> None:
        result = await widgets.call(self.api.accept_item(item.id))
        if result is not FAILED:
            ui.notify(f"Accepted change #{item.index + 1}.", type="positive")
        await self.load()

    async def reject(self, item: ActionItemInfo) -> None:
        result = await widgets.call(self.api.reject_item(item.id))
        if result is not FAILED:
            ui.notify(f"Rejected change #{item.index + 1}.", type="info")
        await self.load()


def _cell(value: Any) -> str:
    if value is None:
        return "(empty)"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return widgets.reveal_invisible(str(value))
