"""The review: which entries a filter names, one run's timeline read from its audit entries, and one function
per report. Every function takes the caller's context and answers for their company only; the caller must
see the company's history (an admin or an auditor). Reports name runs, people, datasets and files, never
record or output contents."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from backend import clock
from backend.actions.service import item_payload, may_read_values
from backend.actions.tables import ActionItem, ItemStatus
from backend.audit import export
from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.errors import Forbidden, NotFound
from backend.review.schemas import (
    AcceptedPerPerson,
    ApprovedDespiteWarning,
    FindingsOnDay,
    RejectionRate,
    RunTimeline,
    ScheduleReads,
    TimelineStep,
    UnreviewedFollowup,
)
from backend.runs.read import contents_withheld
from backend.runs.rows import whole_run
from backend.runs.sources import run_sources
from backend.runs.tables import ApprovalKind, Run
from backend.schedules.tables import Schedule
from backend.tenancy import oauth
from backend.tenancy.context import UserContext, token_actor
from backend.tenancy.tables import ApiToken, User

APPROVALS = (*audit.RUN_APPROVALS, "flow.approved")
REJECTIONS = ("run.rejected", "flow.rejected")
WARNING_LEVELS = ("high", "medium")


def require_reviewer(ctx: UserContext) -> None:
    if not ctx.sees_company_history:
        raise Forbidden("only a company admin or an auditor can browse the audit trail")


def export_reveal(ctx: UserContext) -> export.Reveal | None:
    """Whose contents a reader of the company's audit export sees: every entry's for an admin (None); for
    an auditor, by the rules the other views use: an entry about a run only when they see that run's
    contents (runs.read.contents_withheld: someone else's run never, their own while they read its sources),
    one about an action item only when they see its values (actions.service.may_read_values: the run's
    sources and the record's visibility); none about anything else. The rest go out as their digest and
    still verify."""
    if not ctx.is_auditor:
        return None

    async def reveal(rows: list[dict[str, Any]]) -> set[int]:
        holding = [row for row in rows if audit.split_contents(row["data"])[1]]
        about = {(r["subject_type"], int(r["subject_id"])) for r in holding if str(r["subject_id"]).isdigit()}
        item_ids = sorted(i for kind, i in about if kind == "action_item")
        items = {
            row["id"]: row
            for row in (
                await ActionItem.select()
                .where(ActionItem.id.is_in(item_ids) & (ActionItem.company == ctx.company_id))
                .output(load_json=True)
                if item_ids
                else []
            )
        }
        run_ids = {i for kind, i in about if kind == "run"} | {item["run"] for item in items.values()}
        runs = {i: await whole_run(i, company_id=ctx.company_id) for i in sorted(run_ids)}
        shown: set[int] = set()
        for row in holding:
            subject = int(row["subject_id"]) if str(row["subject_id"]).isdigit() else None
            if row["subject_type"] == "run":
                run = runs.get(subject)
                if run is not None and contents_withheld(ctx, run, await run_sources(run)) is None:
                    shown.add(row["id"])
            elif row["subject_type"] == "action_item" and subject in items:
                item = items[subject]
                run = runs.get(item["run"])
                if run is not None and await may_read_values(ctx, run, item_payload(item, run)):
                    shown.add(row["id"])
        return shown

    return reveal


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


# ---- filters ---------------------------------------------------------------------------------------------


async def actors_of(ctx: UserContext, email: str) -> list[str]:
    """How the trail names what a person of the company did: in their session, and through each of their
    assistant's tokens and OAuth connections. Nobody (an empty list) for an email that is not one of the company's people."""
    user = (
        await User.select(User.id, User.email)
        .where((User.company == ctx.company_id) & (User.email == email.strip().lower()))
        .first()
    )
    if user is None:
        return []
    tokens = await ApiToken.select(ApiToken.id).where(ApiToken.user == user["id"])
    connectors = await oauth.grant_actors(user["id"], user["email"])
    return [user["email"], *(token_actor(user["email"], t["id"]) for t in tokens), *connectors]


async def _runs_where(ctx: UserContext, *clauses: Any) -> list[dict[str, Any]]:
    query = Run.select(Run.id, Run.flow_id, Run.datasets).where(Run.company == ctx.company_id)
    for clause in clauses:
        query = query.where(clause)
    return await query


async def _items_of(ctx: UserContext, run_ids: set[int]) -> set[str]:
    if not run_ids:
        return set()
    rows = await ActionItem.select(ActionItem.id).where(
        (ActionItem.company == ctx.company_id) & ActionItem.run.is_in(sorted(run_ids))
    )
    return {str(r["id"]) for r in rows}


async def _covering(ctx: UserContext, runs: list[dict[str, Any]], flows: set[int]) -> dict[str, set[str]]:
    """The subjects whose entries tell these runs' and flows' story: the runs, their action items, the flows."""
    run_ids = {r["id"] for r in runs}
    return {
        "run": {str(i) for i in run_ids},
        "action_item": await _items_of(ctx, run_ids),
        "flow": {str(f) for f in flows},
    }


def _intersect(a: dict[str, set[str]] | None, b: dict[str, set[str]]) -> dict[str, set[str]]:
    if a is None:
        return b
    return {kind: a.get(kind, set()) & b.get(kind, set()) for kind in set(a) | set(b)}


async def subjects_for(
    ctx: UserContext, *, run_id: int | None, flow_id: int | None, dataset: str | None
) -> dict[str, set[str]] | None:
    """The subjects a run, flow or dataset filter names (all given filters at once); None without one.
    A run: its entries and its action items'. A flow: its own, its steps' and their items'. A dataset: the
    runs that staged it (with their items and flows) and the proposed changes to its records."""
    chosen: dict[str, set[str]] | None = None
    if run_id is not None:
        chosen = _intersect(chosen, await _covering(ctx, await _runs_where(ctx, Run.id == run_id), set()))
    if flow_id is not None:
        steps = await _runs_where(ctx, Run.flow_id == flow_id)
        flows = {flow_id} if steps else set()  # every flow has steps: one of the company's is the company's
        chosen = _intersect(chosen, await _covering(ctx, steps, flows))
    if dataset is not None:
        name = dataset.strip()
        staged = [r for r in await _runs_where(ctx) if name in (_json(r["datasets"]) or [])]
        covered = await _covering(ctx, staged, {r["flow_id"] for r in staged if r["flow_id"] is not None})
        changes = await ActionItem.select(ActionItem.id).where(
            (ActionItem.company == ctx.company_id) & (ActionItem.dataset == name)
        )
        covered["action_item"] |= {str(r["id"]) for r in changes}
        chosen = _intersect(chosen, covered)
    return chosen


async def entries(
    ctx: UserContext,
    *,
    q: str | None = None,
    action: str | None = None,
    subject_type: str | None = None,
    subject_id: str | None = None,
    person: str | None = None,
    run_id: int | None = None,
    flow_id: int | None = None,
    dataset: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 200,
    offset: int = 0,
) -> list[dict[str, Any]]:
    require_reviewer(ctx)
    return await audit.search(
        ctx.company_id,
        q=q,
        action=action,
        subject_type=subject_type,
        subject_id=subject_id,
        actors=await actors_of(ctx, person) if person else None,
        subjects=await subjects_for(ctx, run_id=run_id, flow_id=flow_id, dataset=dataset),
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )


# ---- one run's timeline ----------------------------------------------------------------------------------


def _rerun_summary(action: str, data: dict[str, Any], actor: str) -> str:
    """A re-run for evidence (backend/evidence/rerun.py) in one line: who asked, or what matched."""
    if action == "run.rerun_requested":
        return (
            f"re-run #{data.get('rerun_id')} for evidence asked by {actor} (actions discarded, not charged)"
        )
    if action == "run.rerun_refused":
        return f"re-run for evidence refused to {actor}: {data.get('reason')}"
    if data.get("status") != "finished":
        return (
            f"re-run #{data.get('rerun_id')} {data.get('status')}: {data.get('problem') or data.get('error')}"
        )
    files = [f for f in data.get("files") or [] if isinstance(f, dict)]
    matched = sum(1 for f in files if f.get("match"))
    printed = "matched" if data.get("printed_output_match") else "differed"
    return (
        f"re-run #{data.get('rerun_id')} in a fresh VM: printed output {printed}, "
        f"{matched} of {len(files)} output file(s) matched"
    )


def _steps_of(entry: dict[str, Any], outputs_shown: bool = True) -> list[TimelineStep]:
    """The timeline's steps read from one entry; the names of a run's outputs only with `outputs` (the
    reader may see what the run made)."""
    action, data = entry["action"], _json(entry["data"]) or {}

    def step(stage: str, summary: str) -> TimelineStep:
        return TimelineStep(
            stage=stage,  # type: ignore[arg-type]
            at=entry["at"],
            actor=entry["actor"],
            action=action,
            summary=summary,
            seq=entry["company_seq"] if entry.get("company_seq") is not None else entry["seq"],
            hash=audit.company_link(entry),
        )

    if action in ("run.proposed", "run.revised", "flow.proposed"):
        what = "revised" if action == "run.revised" else "proposed"
        datasets = ", ".join(data.get("datasets") or []) or "no dataset"
        files = len(data.get("file_ids") or [])
        out = [
            step("proposed", f"{what}: {datasets}, {files} file(s), code {str(data.get('code_sha256'))[:12]}")
        ]
        if "findings" in data:
            out.append(step("scanned", f"staged data scanned: {data['findings']} warning(s)"))
        return out
    if action in APPROVALS:
        by = data.get("by") or entry["actor"]
        if action == "schedule.fired":
            return [step("approved", f"fired by schedule #{data.get('schedule_id')}")]
        if action == "run.followup_auto_approved":
            return [
                step("approved", f"let through without review under run #{data.get('narrowed_from_run')}")
            ]
        how = data.get("auth")
        return [step("approved", f"approved by {by}" + (f" ({how})" if how else ""))]
    if action in REJECTIONS:
        reason = f": {data['reason']}" if data.get("reason") else ""
        return [step("rejected", f"rejected by {entry['actor']}{reason}")]
    if action == "run.started":
        return [step("vm", "a fresh VM started with the approved code and data")]
    if action == "run.finished":
        vm = data.get("vm") or {}
        out = [
            step(
                "vm",
                f"finished: {data.get('status')}, exit code {data.get('exit_code')}, "
                f"{vm.get('nics', '?')} network interface(s)",
            )
        ]
        outputs = data.get("outputs") or []
        names = ", ".join(str(o.get("name")) for o in outputs if isinstance(o, dict)) or "none"
        if not outputs_shown:
            names = "names withheld (you may not see what this run made)"
        out.append(step("outputs", f"{len(outputs)} output file(s): {names}"))
        if data.get("actions") is not None:
            out.append(step("items", f"{data['actions']} change(s) proposed"))
        return out
    if action == "run.followup_needs_approval":
        return [step("proposed", f"asked as a follow-up, needs a person's approval: {data.get('reason')}")]
    if action == "flow.step_handed":
        return [
            step(
                "vm",
                f"step {data.get('step')} (run #{data.get('run_id')}) handed what the steps before it made",
            )
        ]
    if action in ("run.rerun_requested", "run.rerun_refused", "run.rerun_finished"):
        return [step("vm", _rerun_summary(action, data, entry["actor"]))]
    if action.startswith("run."):
        return [step("vm", action.removeprefix("run.").replace("_", " "))]
    if action == "credits.charged":
        return [step("vm", f"charged {data.get('credits', '?')} credits")]
    if action.startswith("action."):
        verb = action.removeprefix("action.")
        return [step("items", f"item #{entry['subject_id']} {verb} by {entry['actor']}")]
    return [step("other", action)]


async def timeline(ctx: UserContext, run_id: int) -> RunTimeline:
    """A run's story as the trail tells it: proposed → scanned → approved or rejected → VM → outputs → items
    decided, each step with the entry (seq and hash) it was read from. A flow's step includes its flow's."""
    require_reviewer(ctx)
    run = (
        await Run.select(
            Run.id,
            Run.title,
            Run.status,
            Run.flow_id,
            Run.requested_by,
            Run.company,
            Run.datasets,
            Run.file_ids,
            Run.source_datasets,
        )
        .where((Run.id == run_id) & (Run.company == ctx.company_id))
        .output(load_json=True)
        .first()
    )
    if run is None:
        raise NotFound(f"run {run_id} not found")
    subjects = await _covering(ctx, [run], {run["flow_id"]} if run["flow_id"] is not None else set())
    about = [
        (AuditEntry.subject_type == kind) & AuditEntry.subject_id.is_in(sorted(ids))
        for kind, ids in subjects.items()
        if ids
    ]
    either = about[0]
    for clause in about[1:]:
        either = either | clause
    rows = (
        await AuditEntry.select()
        .where((AuditEntry.company_id == ctx.company_id) & either)
        .order_by(AuditEntry.seq)
    )
    sources = await run_sources(run)

    def outputs(row: dict[str, Any]) -> bool:  # a run's end names the sources of what it made
        data = _json(row["data"]) or {}
        named = data.get("source_datasets") if isinstance(data, dict) else None
        return contents_withheld(ctx, run, named if isinstance(named, list) else sources) is None

    steps = [s for row in rows for s in _steps_of(row, outputs(row))]
    return RunTimeline(
        run_id=run["id"], title=run["title"], status=run["status"], flow_id=run["flow_id"], steps=steps
    )


# ---- reports ---------------------------------------------------------------------------------------------


async def _emails(user_ids: set[int]) -> dict[int, str]:
    if not user_ids:
        return {}
    rows = await User.select(User.id, User.email).where(User.id.is_in(sorted(user_ids)))
    return {r["id"]: r["email"] for r in rows}


def _between(query: Any, column: Any, since: datetime | None, until: datetime | None) -> Any:
    if since is not None:
        query = query.where(column >= since)
    if until is not None:
        query = query.where(column <= until)
    return query


async def approved_despite_warning(
    ctx: UserContext, since: datetime | None = None, until: datetime | None = None
) -> list[ApprovedDespiteWarning]:
    """Runs let run although the approval screen showed a high or medium warning (instruction-like text in
    the staged data, or invisible characters in the code), newest approval first."""
    require_reviewer(ctx)
    query = Run.select(
        Run.id,
        Run.title,
        Run.status,
        Run.requested_by,
        Run.approved_by,
        Run.approval_kind,
        Run.approved_at,
        Run.findings,
        Run.flow_id,
    ).where((Run.company == ctx.company_id) & Run.approved_at.is_not_null())
    rows = await _between(query, Run.approved_at, since, until).order_by(Run.approved_at, ascending=False)
    flagged = []
    for row in rows:
        levels = [f.get("severity") for f in _json(row["findings"]) or [] if isinstance(f, dict)]
        if any(level in WARNING_LEVELS for level in levels):
            flagged.append((row, levels))
    emails = await _emails({row["requested_by"] for row, _ in flagged})
    seqs = await _approval_seqs(ctx, [row["id"] for row, _ in flagged])
    return [
        ApprovedDespiteWarning(
            run_id=row["id"],
            title=row["title"],
            status=row["status"],
            requested_by=emails.get(row["requested_by"], "?"),
            approved_by=row["approved_by"] or "?",
            approval_kind=row["approval_kind"] or ApprovalKind.person,
            approved_at=row["approved_at"],
            worst="high" if "high" in levels else "medium",
            high=levels.count("high"),
            medium=levels.count("medium"),
            warnings=len(levels),
            approval_seq=seqs.get(str(row["id"])),
        )
        for row, levels in flagged
    ]


async def _approval_seqs(ctx: UserContext, run_ids: list[int]) -> dict[str, int]:
    if not run_ids:
        return {}
    rows = await AuditEntry.select(AuditEntry.subject_id, AuditEntry.company_seq).where(
        (AuditEntry.company_id == ctx.company_id)
        & (AuditEntry.subject_type == "run")
        & AuditEntry.subject_id.is_in([str(i) for i in run_ids])
        & AuditEntry.action.is_in(list(APPROVALS))
    )
    return {r["subject_id"]: r["company_seq"] for r in rows}  # the company's own numbering


async def unreviewed_followups(
    ctx: UserContext, since: datetime | None = None, until: datetime | None = None
) -> list[UnreviewedFollowup]:
    """Follow-ups that ran without a second approval (under the grant of a run a person approved), with what
    they read: datasets, Drive files by name, rows staged. Newest first."""
    require_reviewer(ctx)
    query = Run.select(
        Run.id,
        Run.title,
        Run.status,
        Run.requested_by,
        Run.narrowed_from,
        Run.approved_at,
        Run.datasets,
        Run.manifest,
    ).where(
        (Run.company == ctx.company_id)
        & (Run.approval_kind == ApprovalKind.followup)
        & Run.narrowed_from.is_not_null()
    )
    rows = await _between(query, Run.approved_at, since, until).order_by(Run.approved_at, ascending=False)
    emails = await _emails({r["requested_by"] for r in rows})
    out = []
    for row in rows:
        entries = (_json(row["manifest"]) or {}).get("files") or []
        files = sorted(_drive_files(row["manifest"]))
        out.append(
            UnreviewedFollowup(
                run_id=row["id"],
                title=row["title"],
                status=row["status"],
                requested_by=emails.get(row["requested_by"], "?"),
                narrowed_from=row["narrowed_from"],
                approved_at=row["approved_at"],
                datasets=list(_json(row["datasets"]) or []),
                files=files,
                rows=sum(int(e.get("rows") or 0) for e in entries),
            )
        )
    return out


async def accepted_per_person(
    ctx: UserContext, since: datetime | None = None, until: datetime | None = None
) -> list[AcceptedPerPerson]:
    """How many proposed changes each person accepted, and on which runs; most first."""
    require_reviewer(ctx)
    query = ActionItem.select(ActionItem.decided_by, ActionItem.run, ActionItem.decided_at).where(
        (ActionItem.company == ctx.company_id) & (ActionItem.status == ItemStatus.accepted)
    )
    rows = await _between(query, ActionItem.decided_at, since, until).order_by(
        ActionItem.decided_at, ascending=False
    )
    people: dict[str, AcceptedPerPerson] = {}
    for row in rows:
        person = row["decided_by"] or "?"
        entry = people.setdefault(person, AcceptedPerPerson(person=person, accepted=0, run_ids=[]))
        entry.accepted += 1
        if row["run"] not in entry.run_ids:
            entry.run_ids.append(row["run"])
    return sorted(people.values(), key=lambda p: (-p.accepted, p.person))


async def rejection_rate(
    ctx: UserContext, since: datetime | None = None, until: datetime | None = None
) -> list[RejectionRate]:
    """Per person who decided runs: how many they approved and rejected, and the share rejected. Only a
    person's own decisions count (not follow-ups let through by a grant, not schedules)."""
    require_reviewer(ctx)
    approved = _between(
        Run.select(Run.id, Run.approved_by).where(
            (Run.company == ctx.company_id) & (Run.approval_kind == ApprovalKind.person)
        ),
        Run.approved_at,
        since,
        until,
    )
    rejected = _between(
        Run.select(Run.id, Run.rejected_by).where(
            (Run.company == ctx.company_id) & Run.rejected_by.is_not_null()
        ),
        Run.rejected_at,
        since,
        until,
    ).order_by(Run.rejected_at, ascending=False)
    people: dict[str, RejectionRate] = {}

    def of(person: str) -> RejectionRate:
        return people.setdefault(
            person, RejectionRate(person=person, approved=0, rejected=0, rate=0.0, rejected_run_ids=[])
        )

    for row in await approved:
        of(row["approved_by"] or "?").approved += 1
    for row in await rejected:
        entry = of(row["rejected_by"])
        entry.rejected += 1
        entry.rejected_run_ids.append(row["id"])
    for entry in people.values():
        entry.rate = round(entry.rejected / (entry.approved + entry.rejected), 4)
    return sorted(people.values(), key=lambda p: (-p.rate, -p.rejected, p.person))


def _drive_files(manifest: Any) -> set[str]:
    entries = (_json(manifest) or {}).get("files") or []
    return {
        str((e.get("source") or {}).get("name"))
        for e in entries
        if isinstance(e, dict) and (e.get("source") or {}).get("type") == "drive_file"
    }


async def schedule_reads(ctx: UserContext) -> list[ScheduleReads]:
    """Every schedule of the company and what each firing reads (its approved run's, or flow's, datasets and
    Drive files), with how often it fired; newest schedule first."""
    require_reviewer(ctx)
    schedules = (
        await Schedule.select()
        .where(Schedule.company == ctx.company_id)
        .order_by(Schedule.id, ascending=False)
    )
    if not schedules:
        return []
    origins = {s["origin_run"] for s in schedules}
    flows = {s["origin_flow"] for s in schedules if s["origin_flow"] is not None}
    clause = Run.id.is_in(sorted(origins))
    if flows:
        clause = clause | Run.flow_id.is_in(sorted(flows))
    runs = await Run.select(Run.id, Run.flow_id, Run.datasets, Run.manifest).where(
        (Run.company == ctx.company_id) & clause
    )
    fired = await Run.select(Run.schedule_id).where(
        (Run.company == ctx.company_id) & Run.schedule_id.is_in([s["id"] for s in schedules])
    )
    emails = await _emails({s["owner"] for s in schedules})
    out = []
    for s in schedules:
        read = [
            r
            for r in runs
            if r["id"] == s["origin_run"]
            or (s["origin_flow"] is not None and r["flow_id"] == s["origin_flow"])
        ]
        out.append(
            ScheduleReads(
                schedule_id=s["id"],
                owner=emails.get(s["owner"], "?"),
                cron=s["cron"],
                timezone=s["timezone"],
                status=s["status"],
                run_id=s["origin_run"],
                flow_id=s["origin_flow"],
                datasets=sorted({d for r in read for d in _json(r["datasets"]) or []}),
                files=sorted(set().union(*(_drive_files(r["manifest"]) for r in read))),
                fired=sum(1 for f in fired if f["schedule_id"] == s["id"]),
                last_run_id=s["last_run_id"],
            )
        )
    return out


async def findings_over_time(
    ctx: UserContext, since: datetime | None = None, until: datetime | None = None
) -> list[FindingsOnDay]:
    """Per day (UTC) the company's runs were proposed, the findings their approval screens showed (the
    scanner's on the staged data and the code), by category; the last 30 days unless `since` says. Days
    without findings are left out."""
    require_reviewer(ctx)
    since = since or clock.now() - timedelta(days=30)
    query = Run.select(Run.created_at, Run.findings).where(Run.company == ctx.company_id)
    days: dict[str, FindingsOnDay] = {}
    for row in await _between(query, Run.created_at, since, until):
        found = [f for f in _json(row["findings"]) or [] if isinstance(f, dict)]
        if not found:
            continue
        moment = row["created_at"]
        day = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).date().isoformat()
        entry = days.setdefault(day, FindingsOnDay(day=day, runs=0, by_category={}))
        entry.runs += 1
        for finding in found:
            category = str(finding.get("category") or "unknown")
            entry.by_category[category] = entry.by_category.get(category, 0) + 1
    return [days[day] for day in sorted(days)]
