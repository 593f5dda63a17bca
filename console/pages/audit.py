"""Audit (admin, auditor): verify the chain; the trail filtered by person, run, flow, dataset, action and date;
a run's timeline; and the review's reports with charts, each row linking to its run. The numbers are the
API's (backend/review); this page only shows them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from backend.audit.schemas import AuditEntryInfo, AuditVerification
from backend.records.names import DATASET_NAMES
from backend.review.schemas import (
    AcceptedPerPerson,
    ApprovedDespiteWarning,
    FindingsOnDay,
    RejectionRate,
    RunTimeline,
    ScheduleReads,
    UnreviewedFollowup,
)
from console import charts, session, theme, widgets
from console.api import Api
from console.widgets import FAILED, section

PAGE = 200
MAX_SHOWN = 1000  # the API's largest page

SUBJECTS = [
    "",
    "run",
    "flow",
    "action_item",
    "company",
    "user",
    "drive_file",
    "schedule",
    "session",
    "api_token",
]
STAGE_ICONS = {
    "proposed": ("edit_note", "primary"),
    "scanned": ("policy", "orange"),
    "approved": ("task_alt", "positive"),
    "rejected": ("block", "negative"),
    "vm": ("memory", "secondary"),
    "outputs": ("inventory_2", "accent"),
    "items": ("rule", "primary"),
    "other": ("info", "grey"),
}
RUN_SLOT = r"""
<q-td :props="props">
  <a :href="'/runs/' + props.row.run_id" class="text-primary">#{{ props.row.run_id }} {{ props.row.title }}</a>
</q-td>
"""
RUNS_SLOT = r"""
<q-td :props="props">
  <a v-for="id in props.value" :key="id" :href="'/runs/' + id" class="text-primary q-mr-sm">#{{ id }}</a>
</q-td>
"""


def _column(name: str, label: str, align: str = "left") -> dict[str, Any]:
    return {"name": name, "label": label, "field": name, "align": align}


def register() -> None:
    @ui.page("/audit")
    async def audit_page(run: int | None = None) -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/audit", admin=True, auditor=True):
            return redirect
        api = session.api()
        with theme.frame("Audit trail"):
            with ui.card().classes("w-full").mark("verify"):
                with ui.row().classes("items-center gap-4"):
                    ui.button("Verify chain", icon="verified", on_click=lambda: verify()).mark(
                        "verify-button"
                    )
                    ui.label(
                        "Recomputes every entry's hash and its link to the one before, and checks each "
                        "against the anchor kept outside the database; any edit or gap shows."
                    ).classes("text-sm text-grey-7")
                signing_key = ui.column().classes("w-full").mark("signing-key")
                verdict = ui.column().classes("w-full")
            with ui.row().classes("items-end gap-3 w-full").mark("audit-filters"):
                query = (
                    ui.input("Search (who, what, subject id)")
                    .props("dense outlined clearable")
                    .classes("w-72")
                )
                query.mark("audit-q")
                person = (
                    ui.select({"": "anyone"}, value="", label="Person")
                    .props("dense outlined")
                    .classes("w-56")
                    .mark("f-person")
                )
                action = (
                    ui.input("Action (exact)")
                    .props("dense outlined clearable")
                    .classes("w-48")
                    .mark("f-action")
                )
                subject = (
                    ui.select({s: s or "any subject" for s in SUBJECTS}, value="", label="Subject")
                    .props("dense outlined")
                    .classes("w-44")
                )
                run_no = (
                    ui.number("Run #", value=run, min=1, format="%d")
                    .props("dense outlined clearable")
                    .classes("w-28")
                    .mark("f-run")
                )
                flow_no = (
                    ui.number("Flow #", min=1, format="%d")
                    .props("dense outlined clearable")
                    .classes("w-28")
                    .mark("f-flow")
                )
                dataset = (
                    ui.select({"": "any dataset", **{d: d for d in DATASET_NAMES}}, value="", label="Dataset")
                    .props("dense outlined")
                    .classes("w-44")
                    .mark("f-dataset")
                )
                since = ui.input("From (YYYY-MM-DD)").props("dense outlined clearable").classes("w-40")
                since.mark("f-from")
                until = ui.input("To (YYYY-MM-DD)").props("dense outlined clearable").classes("w-40")
                until.mark("f-to")
                query.on("keydown.enter", lambda: search())
                ui.button("Search", icon="search", on_click=lambda: search()).mark("audit-search")
            timeline_box = ui.column().classes("w-full")
            results = ui.column().classes("w-full")
            with section("Reports", "insights", "reports"):
                ui.label(
                    "Over the dates above when given; each row links to its run, and its timeline is one "
                    "search away (Run #)."
                ).classes("text-sm text-grey-7")
                reports = ui.column().classes("w-full gap-4")
        shown = {"limit": PAGE}

        def number(value: Any) -> int | None:
            return int(value) if value not in (None, "") else None

        async def fetch() -> list[AuditEntryInfo]:
            return await api.audit(
                q=(query.value or "").strip() or None,
                action=(action.value or "").strip() or None,
                subject_type=subject.value or None,
                person=person.value or None,
                run=number(run_no.value),
                flow=number(flow_no.value),
                dataset=dataset.value or None,
                **period(),
                limit=shown["limit"],
            )

        def period() -> dict[str, str | None]:
            return {"from": (since.value or "").strip() or None, "to": (until.value or "").strip() or None}

        def render(entries: list[AuditEntryInfo]) -> None:
            widgets.audit_table(entries)
            if len(entries) >= shown["limit"] and shown["limit"] < MAX_SHOWN:
                ui.button("Show older entries", icon="expand_more", on_click=more).props("flat").mark(
                    "audit-more"
                )

        async def more() -> None:
            shown["limit"] = min(shown["limit"] + PAGE, MAX_SHOWN)
            await widgets.load_into(results, fetch, render, "Loading older entries…")

        async def search() -> None:
            shown["limit"] = PAGE
            run_id = number(run_no.value)
            timeline_box.clear()
            results.clear()  # the entries of the search before are gone at once, not after the timeline
            with results:
                widgets.loading("Searching the audit trail…")
            if run_id is not None:
                await widgets.load_into(
                    timeline_box,
                    lambda: api.audit_timeline(run_id),
                    show_timeline,
                    "Reading the run's story…",
                )
            await widgets.load_into(results, fetch, render, "Searching the audit trail…")
            await load_reports(api, reports, period())

        async def verify() -> None:
            verdict.clear()
            with verdict:
                widgets.loading("Verifying the chain…")
            result = await widgets.call(api.verify_audit())
            verdict.clear()
            if result is FAILED:
                return
            with verdict:
                show_verdict(result)  # type: ignore[arg-type]

        await ui.context.client.connected()
        try:
            key = await api.audit_public_key()
        except Exception:  # noqa: BLE001 - the page works without it; the export's verifier needs the key itself
            key = None
        with signing_key:
            if key is not None:
                ui.label(
                    f"Exports are signed with the server's Ed25519 key, fingerprint {key.fingerprint}: check one "
                    "with scripts/verify_audit_export.py FILE --public-key KEY (the key: GET /api/audit/public-key "
                    "or `cleanroom audit public-key`)."
                ).classes("text-xs font-mono text-grey-7")
        try:
            people = await api.people()
        except Exception:  # noqa: BLE001 - the filter still works by typing nothing; the trail loads below
            people = []
        person.set_options({"": "anyone", **{p.email: p.email for p in people}}, value="")
        await search()
        return None


def show_timeline(timeline: RunTimeline) -> None:
    run_id = timeline.run_id
    with section(f"Timeline of run #{run_id}: {timeline.title}", "timeline", "timeline"):
        with ui.row().classes("items-center gap-4 text-sm"):
            widgets.status_badge(timeline.status)
            ui.link("open the run", f"/runs/{run_id}").mark("timeline-run-link")
        steps = timeline.steps
        if not steps:
            widgets.empty_state("The trail holds no entry about this run.")
            return
        with ui.timeline(side="right", layout="dense").classes("w-full"):
            for step in steps:
                icon, color = STAGE_ICONS.get(step.stage, STAGE_ICONS["other"])
                ui.timeline_entry(
                    step.summary,
                    title=step.stage,
                    subtitle=f"{widgets.when(step.at)} · {step.actor} · entry #{step.seq}",
                    icon=icon,
                    color=color,
                )


async def load_reports(api: Api, container: ui.element, period: dict[str, str | None]) -> None:
    container.clear()
    with container:
        boxes = [(ui.column().classes("w-full"), name, render) for name, render in REPORT_VIEWS]
    for box, name, render in boxes:
        await widgets.load_into(box, _fetcher(api, name, period), render, "Computing the report…")


def _fetcher(api: Api, name: str, period: dict[str, str | None]) -> Callable[[], Awaitable[Any]]:
    return lambda: api.audit_report(name, **period)


def read_text(datasets: list[str], files: list[str]) -> str:
    """What a follow-up or a schedule reads, in words: its datasets and Drive files, or "nothing"."""
    return ", ".join([*(f"dataset {d}" for d in datasets), *(f"file {f}" for f in files)]) or "nothing"


def _report_table(
    rows: list[dict[str, Any]], columns: list[dict[str, Any]], marker: str, key: str
) -> ui.table:
    table = ui.table(rows=rows, columns=columns, row_key=key).props("dense flat bordered wrap-cells")
    table.classes("w-full").mark(marker)
    return table


def warned_report(rows: list[ApprovedDespiteWarning]) -> None:
    with section("Runs approved despite a high or medium warning", "warning", "report-warned"):
        ui.plotly(charts.warned_approvals(rows)).classes("w-full").mark("chart-warned")
        if not rows:
            return
        shown = [
            {
                **r.model_dump(mode="json"),
                "approved_at": widgets.when(r.approved_at),
                "warnings_text": f"{r.worst}: {r.high} high, {r.medium} medium, {r.warnings} in all",
            }
            for r in rows
        ]
        table = _report_table(
            shown,
            [
                _column("run_id", "Run"),
                _column("requested_by", "Asked by"),
                _column("approved_by", "Approved by"),
                _column("approval_kind", "How"),
                _column("approved_at", "When"),
                _column("warnings_text", "Warnings shown"),
                _column("approval_seq", "Entry #", "right"),
            ],
            "warned-table",
            "run_id",
        )
        table.add_slot("body-cell-run_id", RUN_SLOT)


def followups_report(rows: list[UnreviewedFollowup]) -> None:
    with section("Follow-ups run without review, and what they read", "visibility_off", "report-followups"):
        ui.plotly(charts.followups_per_person(rows)).classes("w-full").mark("chart-followups")
        if not rows:
            return
        shown = [
            {
                **r.model_dump(mode="json"),
                "approved_at": widgets.when(r.approved_at),
                "read": read_text(r.datasets, r.files),
                "under": [r.narrowed_from],
            }
            for r in rows
        ]
        table = _report_table(
            shown,
            [
                _column("run_id", "Run"),
                _column("requested_by", "Asked by"),
                _column("under", "Under the approval of"),
                _column("approved_at", "Let through"),
                _column("read", "Read"),
                _column("rows", "Rows", "right"),
            ],
            "followups-table",
            "run_id",
        )
        table.add_slot("body-cell-run_id", RUN_SLOT)
        table.add_slot("body-cell-under", RUNS_SLOT)


def accepted_report(rows: list[AcceptedPerPerson]) -> None:
    with section("Proposed changes accepted, per person", "rule", "report-accepted"):
        ui.plotly(charts.accepted_per_person(rows)).classes("w-full").mark("chart-accepted")
        if not rows:
            return
        table = _report_table(
            [r.model_dump(mode="json") for r in rows],
            [
                _column("person", "Person"),
                _column("accepted", "Accepted", "right"),
                _column("run_ids", "Runs"),
            ],
            "accepted-table",
            "person",
        )
        table.add_slot("body-cell-run_ids", RUNS_SLOT)


def findings_report(rows: list[FindingsOnDay]) -> None:
    with section("Findings over time, by category", "report_problem", "report-findings"):
        ui.plotly(charts.findings_over_time(rows)).classes("w-full").mark("chart-findings")


def rejections_report(rows: list[RejectionRate]) -> None:
    with section("Rejection rate per person", "block", "report-rejections"):
        ui.plotly(charts.rejection_rate(rows)).classes("w-full").mark("chart-rejections")
        if not rows:
            return
        shown = [
            {**r.model_dump(mode="json"), "rate_text": f"{round(100 * float(r.rate or 0))} %"} for r in rows
        ]
        table = _report_table(
            shown,
            [
                _column("person", "Person"),
                _column("approved", "Approved", "right"),
                _column("rejected", "Rejected", "right"),
                _column("rate_text", "Rejected share", "right"),
                _column("rejected_run_ids", "Rejected runs"),
            ],
            "rejections-table",
            "person",
        )
        table.add_slot("body-cell-rejected_run_ids", RUNS_SLOT)


def schedules_report(rows: list[ScheduleReads]) -> None:
    with section("Schedules and what they read", "event_repeat", "report-schedules"):
        if not rows:
            widgets.empty_state("No schedules.", "event_busy")
            return
        shown = [
            {
                **r.model_dump(mode="json"),
                "when": f"{r.cron} ({r.timezone})",
                "read": read_text(r.datasets, r.files),
                "runs": [r.run_id, *([r.last_run_id] if r.last_run_id else [])],
            }
            for r in rows
        ]
        table = _report_table(
            shown,
            [
                _column("schedule_id", "#", "right"),
                _column("owner", "Owner"),
                _column("when", "Fires"),
                _column("status", "Status"),
                _column("read", "Reads"),
                _column("fired", "Fired", "right"),
                _column("runs", "Approved run, last firing"),
            ],
            "schedules-table",
            "schedule_id",
        )
        table.add_slot("body-cell-runs", RUNS_SLOT)


REPORT_VIEWS: list[tuple[str, Callable[[list[Any]], None]]] = [
    ("findings-over-time", findings_report),
    ("approved-despite-warning", warned_report),
    ("unreviewed-followups", followups_report),
    ("accepted-per-person", accepted_report),
    ("rejection-rate", rejections_report),
    ("schedules", schedules_report),
]


def show_verdict(result: AuditVerification) -> None:
    if result.ok:
        with ui.row().classes("items-center gap-2 text-positive").mark("chain-ok"):
            ui.icon("verified").classes("text-2xl")
            checked = widgets.number(result.checked)
            ui.label(f"Chain intact: {checked} of your company's entries checked.")
        head = result.head_hash
        ui.label(f"your company's head hash {head}").classes("text-xs font-mono text-grey-7")
    else:
        with ui.row().classes("items-center gap-2 text-negative").mark("chain-broken"):
            ui.icon("gpp_bad").classes("text-2xl")
            ui.label(
                f"Chain BROKEN{f' at entry #{result.first_bad_seq}' if result.first_bad_seq is not None else ''}: "
                f"{result.reason} "
                f"({widgets.number(result.checked)} entries checked)"
            )
