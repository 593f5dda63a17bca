"""Company settings (admin): the code-execution switch, the follow-up rule, the flows' action cap, data
retention (bundles kept for re-runs as evidence), and schedules."""

from __future__ import annotations

from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.notify.schemas import WebhookInfo
from backend.schedules.schemas import ScheduleInfo
from backend.schedules.status import ScheduleStatus
from backend.tenancy.schemas import CompanySettings as Settings
from console import session, theme, widgets
from console.api import Api, ApiError
from console.widgets import FAILED

FOLLOWUP_EXPLAINED = (
    "When the assistant asks a follow-up question in the same conversation, its new code may run without "
    "a second code approval, but only if it reads a subset of the data already approved there (the same or "
    "fewer datasets and files, within the same limits). Anything that needs more data goes back to the "
    "normal approval screen. Off: every run needs its own approval."
)
FLOW_CAP_EXPLAINED = (
    "A flow's steps with the capability propose_writes may propose at most this many record changes in all; "
    "a step that would go over keeps none of its own. Every change still waits for a person to accept it. "
    "A flow keeps the cap it was proposed under."
)
DRIVE_LIMITS = (  # setting, label, default, highest allowed (the API checks the same ranges)
    ("drive_quota_mb_per_user", "MB per person (1–102400)", 2048, 102_400),
    ("drive_quota_mb_per_company", "MB for the company (1–1048576)", 20480, 1_048_576),
    ("drive_uploads_per_hour", "Uploads per person per hour (1–10000)", 200, 10_000),
)
DRIVE_EXPLAINED = (
    "Uploads past a quota are refused with 413 and past the hourly count with 429, each saying which limit; "
    "a run's outputs are bounded by the run's own limits and count towards the quotas."
)
CREDIT_LIMITS = (  # setting, label (0: no limit; never above the pool: the API checks the same)
    ("credit_limit_per_person", "Credits per person this month (0: none)"),
    ("credit_limit_per_day", "Credits for the company per day (0: none)"),
)
CREDITS_EXPLAINED = (
    "Limits within the pool: an approval past one is refused, saying which. The pool itself and the plan are "
    "the operator's (plans and top-ups on the host); runs and the assistant platform's chat turns draw on it."
)
RETENTION_EXPLAINED = (
    "A data-retention choice, off by default (0 days): a run's staged bundle, the copy of company data it was "
    "approved with, is deleted when the run ends. Keep approved bundles for N days and, while one is kept, a "
    "company admin or an auditor can re-run the exact approved code over it in a fresh VM (its proposed "
    "changes discarded, not charged) and see whether the printed output and each output file match. Kept "
    "bundles are copies of company data on the server for that long; turning this down or off deletes them "
    "at the next sweep."
)
GRANT_EXPLAINED = (
    "Each approval grants this for a limited time and number of follow-ups, and the approval screen says so "
    "before anyone approves. Changes proposed by a follow-up nobody reviewed are marked as such."
)


WEBHOOKS_EXPLAINED = (
    "Cleanroom POSTs a signed JSON message to each endpoint when something waits for someone (a run for its "
    "approval, proposed changes, a schedule that could not fire, the pool at 80 % and 100 %, a lost host) or "
    "a run ends. It carries ids and a link, never code or record values. Verify the X-Cleanroom-Signature "
    "with the endpoint's secret (docs/notifications.md); the secret is shown once, when the endpoint is added."
)


def register() -> None:
    @ui.page("/settings")
    async def settings_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/settings", admin=True):
            return redirect
        with theme.frame("Company settings"):
            company = ui.column().classes("w-full gap-4")
            with ui.card().classes("w-full gap-2").mark("schedules"):
                with ui.row().classes("items-center gap-2"):
                    ui.icon("schedule", color="primary")
                    ui.label("Schedules").classes("text-lg font-medium")
                ui.label(
                    "Only a run that proposed no changes can be scheduled; each firing runs the same frozen, "
                    "approved code, and any actions.json it writes is discarded unread."
                ).classes("text-sm text-grey-7")
                schedules = ui.column().classes("w-full")
            with ui.card().classes("w-full gap-2").mark("webhooks"):
                with ui.row().classes("items-center gap-2"):
                    ui.icon("webhook", color="primary")
                    ui.label("Webhooks").classes("text-lg font-medium")
                ui.label(WEBHOOKS_EXPLAINED).classes("text-sm text-grey-7")
                hooks = ui.column().classes("w-full")
        api = session.api()
        await ui.context.client.connected()
        await widgets.load_into(company, api.company_settings, lambda s: CompanySettings(company, s, api))
        await Schedules(schedules, api).load()
        await Webhooks(hooks, api).load()
        return None


class CompanySettings:
    def __init__(self, container: ui.element, current: Settings, api: Api) -> None:
        self.container = container
        self.api = api
        self.render(current)

    def render(self, current: Settings) -> None:
        self.container.clear()
        with self.container:
            writes = current.assistant_write_enabled
            with ui.card().classes("w-full gap-2").mark("code-execution"):
                ui.label("Code execution").classes("text-lg font-medium")
                switch = ui.switch(
                    "Let the assistant run code on company data (every run still needs approval)",
                    value=current.code_execution_enabled,
                ).mark("code-execution-switch")
                ui.label(
                    "Ships off: nothing runs until an admin turns this on. Turning it off refuses new runs at once."
                ).classes("text-sm text-grey-7")
                if not writes:
                    switch.disable()
                    with ui.row().classes("items-center gap-2 text-warning").mark("writes-off"):
                        ui.icon("lock")
                        ui.label(
                            "Unavailable: the assistant's ability to write is turned off for this company, so "
                            "code execution is gone entirely. Turn on the assistant's write ability first."
                        )
                switch.on_value_change(lambda e: self.save(code_execution_enabled=e.value))

            with ui.card().classes("w-full gap-2").mark("assistant-writes"):
                ui.label("Assistant write ability").classes("text-lg font-medium")
                ui.switch(
                    "The assistant may propose changes and run code",
                    value=writes,
                    on_change=lambda e: self.save(assistant_write_enabled=e.value),
                ).mark("writes-switch")
                ui.label(
                    "Off removes code execution and every run endpoint; proposals already made stay in the record."
                ).classes("text-sm text-grey-7")

            with ui.card().classes("w-full gap-2").mark("followup"):
                ui.label("Follow-ups without a second approval").classes("text-lg font-medium")
                ui.switch(
                    "Allow narrowing follow-ups to run without re-approval",
                    value=current.followup_without_reapproval,
                    on_change=lambda e: self.save(followup_without_reapproval=e.value),
                ).mark("followup-switch")
                ui.label(FOLLOWUP_EXPLAINED).classes("text-sm text-grey-8")
                with ui.row().classes("items-end gap-4"):
                    hours = ui.number(
                        "Grant lasts (hours, 1–168)",
                        value=current.followup_grant_hours,
                        min=1,
                        max=168,
                        step=1,
                        format="%d",
                    ).mark("followup-hours")
                    runs = ui.number(
                        "Follow-ups per approval (1–100)",
                        value=current.followup_grant_max_runs,
                        min=1,
                        max=100,
                        step=1,
                        format="%d",
                    ).mark("followup-max-runs")
                    ui.button(
                        "Save grant limits", icon="save", on_click=lambda: self.save_grant(hours, runs)
                    ).props("flat").mark("followup-limits-save")
                ui.label(GRANT_EXPLAINED).classes("text-sm text-grey-7")

            with ui.card().classes("w-full gap-2").mark("flows"):
                ui.label("Flows").classes("text-lg font-medium")
                with ui.row().classes("items-end gap-4"):
                    cap = ui.number(
                        "Action items per flow (1–500)",
                        value=current.flow_action_cap,
                        min=1,
                        max=500,
                        step=1,
                        format="%d",
                    ).mark("flow-action-cap")
                    ui.button("Save flow cap", icon="save", on_click=lambda: self.save_flow_cap(cap)).props(
                        "flat"
                    ).mark("flow-action-cap-save")
                ui.label(FLOW_CAP_EXPLAINED).classes("text-sm text-grey-7")

            with ui.card().classes("w-full gap-2").mark("drive-quotas"):
                ui.label("Drive").classes("text-lg font-medium")
                with ui.row().classes("items-end gap-4"):
                    fields = {
                        name: ui.number(
                            label, value=getattr(current, name), min=1, max=high, step=1, format="%d"
                        ).mark(name.replace("_", "-"))
                        for name, label, _default, high in DRIVE_LIMITS
                    }
                    ui.button(
                        "Save Drive limits", icon="save", on_click=lambda: self.save_drive_limits(fields)
                    ).props("flat").mark("drive-quotas-save")
                ui.label(DRIVE_EXPLAINED).classes("text-sm text-grey-7")

            with ui.card().classes("w-full gap-2").mark("data-retention"):
                ui.label("Data retention").classes("text-lg font-medium")
                with ui.row().classes("items-end gap-4"):
                    days = ui.number(
                        "Keep approved bundles for re-runs, days (0: off, up to 365)",
                        value=current.evidence_retention_days,
                        min=0,
                        max=365,
                        step=1,
                        format="%d",
                    ).mark("evidence-retention-days")
                    ui.button(
                        "Save data retention", icon="save", on_click=lambda: self.save_retention(days)
                    ).props("flat").mark("evidence-retention-save")
                ui.label(RETENTION_EXPLAINED).classes("text-sm text-grey-7")

            with ui.card().classes("w-full gap-2").mark("credit-limits"):
                ui.label("Credits").classes("text-lg font-medium")
                with ui.row().classes("gap-6 text-grey-8 text-sm"):
                    ui.label(f"Plan: {current.plan}").mark("plan")
                    ui.label(f"Credit pool: {widgets.number(current.credit_pool)} a month").mark(
                        "credit-pool"
                    )
                pool = int(current.credit_pool or 0)
                with ui.row().classes("items-end gap-4"):
                    limits = {
                        name: ui.number(
                            label, value=getattr(current, name), min=0, max=pool, step=1, format="%d"
                        ).mark(name.replace("_", "-"))
                        for name, label in CREDIT_LIMITS
                    }
                    ui.button(
                        "Save credit limits", icon="save", on_click=lambda: self.save_credit_limits(limits)
                    ).props("flat").mark("credit-limits-save")
                ui.label(CREDITS_EXPLAINED).classes("text-sm text-grey-7")

    async def save_grant(self, hours: ui.number, runs: ui.number) -> None:
        if hours.value is None or runs.value is None:
            ui.notify("Give both the hours and the number of follow-ups.", type="warning")
            return
        await self.save(followup_grant_hours=int(hours.value), followup_grant_max_runs=int(runs.value))

    async def save_flow_cap(self, cap: ui.number) -> None:
        if cap.value is None:
            ui.notify("Give the number of action items a flow may propose.", type="warning")
            return
        await self.save(flow_action_cap=int(cap.value))

    async def save_retention(self, days: ui.number) -> None:
        if days.value is None:
            ui.notify("Give the number of days (0 keeps no bundles).", type="warning")
            return
        await self.save(evidence_retention_days=int(days.value))

    async def save_drive_limits(self, fields: dict[str, ui.number]) -> None:
        if any(field.value is None for field in fields.values()):
            ui.notify("Give every Drive limit.", type="warning")
            return
        await self.save(**{name: int(field.value) for name, field in fields.items()})

    async def save_credit_limits(self, fields: dict[str, ui.number]) -> None:
        if any(field.value is None for field in fields.values()):
            ui.notify("Give both credit limits (0 for none).", type="warning")
            return
        await self.save(**{name: int(field.value) for name, field in fields.items()})

    async def save(self, **changes: Any) -> None:
        result = await widgets.call(self.api.update_company_settings(**changes))
        if result is FAILED:
            current = await widgets.call(self.api.company_settings())
            if current is not FAILED:
                self.render(current)  # type: ignore[arg-type]
            return
        ui.notify("Saved (and recorded in the audit trail).", type="positive")
        self.render(result)  # type: ignore[arg-type]


class Schedules:
    def __init__(self, container: ui.element, api: Api) -> None:
        self.container = container
        self.api = api

    async def load(self) -> None:
        await widgets.load_into(self.container, self.fetch, self.render, "Loading schedules…")

    async def fetch(self) -> list[ScheduleInfo] | None:
        try:
            return await self.api.schedules()
        except ApiError as exc:
            if exc.status == 404:  # absent while the assistant's write ability is off
                return None
            raise

    def render(self, schedules: list[ScheduleInfo] | None) -> None:
        if schedules is None:
            widgets.empty_state(
                "Schedules are unavailable while the assistant's write ability is off.", "block"
            )
            return
        if not schedules:
            widgets.empty_state("No schedules.", "event_busy")
            return
        for item in schedules:
            with (
                ui.row()
                .classes("items-center gap-4 w-full border-b py-2")
                .mark(f"schedule schedule-{item.id}")
            ):
                with ui.column().classes("gap-0 grow"):
                    with ui.row().classes("items-center gap-2"):
                        ui.link(
                            widgets.reveal_invisible(item.title or f"run #{item.run_id}"),
                            f"/runs/{item.run_id}",
                        )
                        widgets.status_badge(item.status)
                    ui.label(
                        f"{item.cron} ({item.timezone}) · owner {item.owner_email}"
                        f" · next {widgets.when(item.next_fire_at)}"
                        f" · last {widgets.when(item.last_fired_at)}"
                    ).classes("text-sm text-grey-7")
                    if item.paused_reason:
                        ui.label(f"paused: {item.paused_reason}").classes("text-sm text-warning")
                if item.status == ScheduleStatus.paused:
                    ui.button(
                        "Resume", icon="play_arrow", on_click=lambda i=item: self.act(i, "resume")
                    ).props("flat dense").mark(f"resume-{item.id}")
                else:
                    ui.button("Pause", icon="pause", on_click=lambda i=item: self.act(i, "pause")).props(
                        "flat dense"
                    ).mark(f"pause-{item.id}")
                ui.button("Delete", icon="delete", on_click=lambda i=item: self.confirm_delete(i)).props(
                    "flat dense color=negative"
                ).mark(f"delete-{item.id}")

    async def act(self, item: ScheduleInfo, action: str) -> None:
        result = await widgets.call(self.api.schedule_action(item.id, action))
        if result is not FAILED:
            ui.notify(f"Schedule {action}d.", type="positive")
        await self.load()

    def confirm_delete(self, item: ScheduleInfo) -> None:
        with ui.dialog() as dialog, ui.card():
            ui.label(
                f"Delete the schedule of “{widgets.reveal_invisible(item.title or '')}”? "
                "Past runs stay in the history."
            )
            with ui.row().classes("justify-end w-full"):
                ui.button("Cancel", on_click=dialog.close).props("flat")

                async def confirm() -> None:
                    dialog.close()
                    await self.act(item, "delete")

                ui.button("Delete", on_click=confirm).props("color=negative").mark("confirm-delete")
        dialog.open()


class Webhooks:
    """The company's webhook endpoints (GET/POST/DELETE /api/company/webhooks): the secret shown once."""

    def __init__(self, container: ui.element, api: Api) -> None:
        self.container = container
        self.api = api

    async def load(self) -> None:
        await widgets.load_into(self.container, self.api.webhooks, self.render, "Loading webhooks…")

    def render(self, hooks: list[WebhookInfo]) -> None:
        if not hooks:
            widgets.empty_state("No webhooks.", "webhook")
        for hook in hooks:
            with (
                ui.row().classes("items-center gap-4 w-full border-b py-2").mark(f"webhook webhook-{hook.id}")
            ):
                with ui.column().classes("gap-0 grow"):
                    ui.label(hook.url).classes("font-mono text-sm")
                    ui.label(
                        f"{', '.join(hook.events) or 'every event'} · {hook.delivered} delivered"
                        f" · {hook.failing} waiting or failed · added by {hook.created_by}"
                    ).classes("text-sm text-grey-7")
                ui.button("Remove", icon="delete", on_click=lambda h=hook: self.remove(h)).props(
                    "flat dense color=negative"
                ).mark(f"remove-webhook-{hook.id}")
        with ui.row().classes("items-center gap-2 w-full"):
            url = ui.input("Endpoint URL (https://…)").classes("grow").mark("webhook-url")
            ui.button("Add", icon="add", on_click=lambda: self.add(url.value)).mark("add-webhook")

    async def add(self, url: str) -> None:
        made = await widgets.call(self.api.create_webhook(url.strip(), []))
        if made is FAILED:
            return
        await self.load()  # the list first: it clears the container the dialog then lives in
        with self.container, ui.dialog() as dialog, ui.card().mark("webhook-secret"):
            ui.label("The endpoint's signing secret, shown this once:")
            ui.label(made.secret).classes("font-mono").mark("webhook-secret-value")  # type: ignore[attr-defined]
            ui.button("Done", on_click=dialog.close)
        dialog.open()

    async def remove(self, hook: WebhookInfo) -> None:
        if await widgets.call(self.api.delete_webhook(hook.id)) is not FAILED:
            ui.notify("Webhook removed.", type="positive")
        await self.load()
