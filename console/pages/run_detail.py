"""One run: the approval screen while it waits, and afterwards everything it did."""

from __future__ import annotations

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.credits.schemas import ApprovalCost
from backend.injection.schemas import Finding
from backend.runs.schemas import FollowupGrant, GrantOffer, RunDetail
from backend.runs.status import RunStatus
from backend.staging.manifest import Manifest
from backend.system_schemas import GuestEnvironment
from console import session, theme, widgets
from console.api import Api
from console.pages.action_items import ActionItems
from console.pages.reruns import Reruns
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


class RunView(widgets.LoadedView[RunDetail]):
    text = "Loading the run…"

    def __init__(self, run_id: int, body: ui.column, api: Api) -> None:
        super().__init__(body, api)
        self.run_id = run_id
        self.run: RunDetail | None = None

    async def fetch(self) -> RunDetail:
        return await self.api.run(self.run_id)

    def moving(self, run: RunDetail) -> bool:
        """While the run is queued or running, re-render once its status changes."""
        return run.status in widgets.ACTIVE_STATUSES

    def differs(self, shown: RunDetail, fresh: RunDetail) -> bool:
        return fresh.status != shown.status

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
        widgets.reason_dialog(
            "Expected here",
            explain=f"{widgets.location(finding)}: this cell will still be shown, marked as acknowledged, on "
            "every run until it changes. The reason is audited.",
            field="Why is this expected here?",
            button="Acknowledge",
            mark="acknowledge",
            color="primary",
            send=lambda reason: self.api.acknowledge_finding(self.run_id, index, reason),
            done="Acknowledged.",
            after=self.load,
        )

    def ask_reject_reason(self) -> None:
        widgets.reason_dialog(
            "Reject this run",
            field="Reason (shown to the assistant)",
            button="Reject",
            mark="reject",
            send=lambda reason: self.api.reject(self.run_id, reason),
            done="Rejected.",
            after=self.load,
        )

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
