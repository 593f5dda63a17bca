"""Reading runs: the one visibility rule for a run, the list and the detail."""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from piccolo.columns.combination import WhereRaw
from piccolo.querystring import QueryString

from backend.credits import service as credits
from backend.drive import service as drive
from backend.errors import NotFound
from backend.hashing import sha256_text
from backend.injection import outputs as outputs_scan
from backend.injection import verdicts
from backend.records.visibility import unreadable_sources
from backend.runs import gates, holds
from backend.runs.followups import followup_grant, grant_fields
from backend.runs.rows import whole_run
from backend.runs.schemas import (
    Approval,
    FollowupGrant,
    GrantOffer,
    PersonRef,
    Rejection,
    RunDetail,
    RunPage,
    RunSummary,
    StagedFile,
)
from backend.runs.sources import run_sources
from backend.runs.tables import FINISHED, Run, RunStatus
from backend.settings import get_settings
from backend.staging import acknowledged
from backend.staging.verdict_store import DbVerdictCache
from backend.tenancy.context import UserContext
from backend.tenancy.tables import User

HARD_MAX_ATTEMPTS = 5


def max_attempts() -> int:
    return max(1, min(get_settings().max_attempts, HARD_MAX_ATTEMPTS))


async def get_run_row(ctx: UserContext, run_id: int) -> dict[str, Any]:
    """A run the caller may see: the requester's own, or any of the company's for an admin or an auditor (who
    see its contents only as `detail` shows them). Else 404. (Whether runs exist at all for the company is
    the controllers' guard, gates.feature_guard.)"""
    row = await whole_run(run_id, company_id=ctx.company_id)
    if row is None or not (ctx.sees_company_history or row["requested_by"] == ctx.user_id):
        raise NotFound(f"no run {run_id}")
    return row


def can_decide(ctx: UserContext, row: dict[str, Any]) -> bool:
    return ctx.decides and (ctx.is_admin or row["requested_by"] == ctx.user_id)


AUDITOR_WITHHELD = (
    "withheld: an auditor sees this run's history, not what it printed or concluded (that is its "
    "requester's); its output files show as your own permissions allow"
)


def auditor_withholds(ctx: UserContext, row: dict[str, Any]) -> str | None:
    """Why an auditor does not see what someone else's run (or flow) printed or concluded: output contents
    carry no record visibility of their own. Its Drive outputs go through the one visibility rule as usual."""
    if ctx.is_auditor and row["requested_by"] != ctx.user_id:
        return AUDITOR_WITHHELD
    return None


def code_diff(before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            "previous attempt",
            "this attempt",
        )
    )


# What the run list shows: no code, plan, manifest or result (those are the detail's), and the number of
# findings counted by the database (json_array_length reads a JSON list on SQLite and PostgreSQL alike).
SUMMARY_COLUMNS = (
    Run.id,
    Run.title,
    Run.status,
    Run.attempt,
    Run.conversation_id,
    Run.requested_by,
    Run.requested_by.email.as_alias("requester_email"),
    Run.requested_by.name.as_alias("requester_name"),
    Run.datasets,
    Run.file_ids,
    Run.created_at,
    Run.finished_at,
    Run.credits_charged,
    Run.schedule_id,
    Run.flow_id,
    Run.flow_step,
    QueryString('COALESCE(json_array_length("run"."findings"), 0) AS "findings_count"'),
)


def reads_dataset(name: str) -> WhereRaw:
    """Runs whose `datasets` JSON list holds `name`: matched as text (`"name"` with its quotes, LIKE
    wildcards escaped), the pattern of records/visibility.py that reads the same on SQLite and PostgreSQL."""
    escaped = name.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return WhereRaw("""COALESCE(CAST("run"."datasets" AS TEXT), '[]') LIKE {} ESCAPE '!'""", f'%"{escaped}"%')


def summary(row: dict[str, Any]) -> RunSummary:
    requester = PersonRef(id=row["requested_by"], email=row["requester_email"], name=row["requester_name"])
    return RunSummary(**{**row, "requested_by": requester})


def visible_to(ctx: UserContext) -> list[Any]:
    """The runs `ctx` may list (conditions to AND): the company's for an admin or an auditor, else one's own.
    The run list and the charts over it (runs.stats) read by this one rule."""
    where: list[Any] = [Run.company == ctx.company_id]
    if not ctx.sees_company_history:
        where.append(Run.requested_by == ctx.user_id)
    return where


async def list_runs(
    ctx: UserContext,
    *,
    user: str | None = None,
    status: str | None = None,
    dataset: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> RunPage:
    """One page of the runs the caller may see, newest first, filtered and counted by the database."""
    where = visible_to(ctx)
    if user:
        where.append(Run.requested_by.email == user.strip().lower())
    if status:
        where.append(Run.status == status)
    if dataset:
        where.append(reads_dataset(dataset))
    if since:
        where.append(Run.created_at >= since)
    if until:
        where.append(Run.created_at <= until)
    rows = (
        await Run.select(*SUMMARY_COLUMNS)
        .where(*where)
        .order_by(Run.id, ascending=False)
        .limit(limit)
        .offset(offset)
        .output(load_json=True)
    )
    total = await Run.count().where(*where)
    return RunPage(items=[summary(r) for r in rows], total=total)


def _staged_files(row: dict[str, Any]) -> list[StagedFile]:
    """The Drive files a run staged, by id and name (from its manifest), for the follow-up grant."""
    names: dict[int, str] = {}
    for entry in (row["manifest"] or {}).get("files") or []:
        source = entry.get("source") or {}
        if source.get("type") == "drive_file" and source.get("drive_file_id") is not None:
            names.setdefault(source["drive_file_id"], source.get("name") or "")
    return [StagedFile(id=i, name=names.get(i, "")) for i in row["file_ids"] or []]


def withheld_reason(unreadable: list[str]) -> str:
    """Why a run's results are not shown to someone who may see the run itself."""
    names = ", ".join(unreadable)
    return (
        f"withheld: this run's results are computed from {names}, which you may no longer read "
        "(a company admin can grant the permission again)"
    )


def contents_withheld(ctx: UserContext, row: dict[str, Any], sources: list[str]) -> str | None:
    """Why `ctx` does not see what a run (or a flow, `row` with its `requested_by`) made - what it printed
    and concluded, and the names, sizes, hashes and reasons of what it wrote or was refused, which its code
    chose and so can carry data - or None when they may: the auditor rule, then the rule Drive applies to
    the run's outputs (`unreadable_sources` of what it is computed from). The one rule of the run's detail,
    its flow's page, its audit entries, its evidence pack, its re-runs and its action items' values."""
    withheld = auditor_withholds(ctx, row)
    if unreadable := unreadable_sources(ctx, sources):
        withheld = withheld_reason(unreadable)
    return withheld


def withhold(row: dict[str, Any], reason: str) -> dict[str, Any]:
    """The run as shown to someone who may not see what it made: nothing it printed, no output or refused
    file listed (names, hashes and reasons are its code's choice), not the guest's error text nor why its
    actions.json was refused, no excerpt of its staged data; the placeholder says why. A run that never ran
    keeps its error: the service's words."""
    result = row["result"]
    error, note = row["error_message"], row["actions_note"]
    if result is not None:
        result = {
            **result,
            "stdout": f"[{reason}]",
            "stderr": "",
            "stdout_truncated": False,
            "files": [],
            "rejected_files": [],
            "error": None,
        }
        error = f"[{reason}]" if error else None
        note = f"[{reason}]" if note else None  # a refused actions.json's reason: the guest may word it
    # the text's hash goes with its excerpt: a short cell's hash can be guessed
    findings = [{**f, "excerpt": "", "span": None, "cell_sha256": None} for f in row["findings"] or []]
    return {**row, "result": result, "findings": findings, "error_message": error, "actions_note": note}


@dataclass(frozen=True)
class Known:
    """What a caller read already for the runs it shows (a proposal that just made one, a flow's page for
    each of its steps): the company's row, the requester, why an approval is blocked now."""

    company: dict[str, Any]
    requester: PersonRef
    blocked: str | None


async def detail(ctx: UserContext, run_id: int) -> RunDetail:
    return await present(ctx, await get_run_row(ctx, run_id))


async def present(
    ctx: UserContext,
    row: dict[str, Any],
    *,
    known: Known | None = None,
    sources: list[str] | None = None,
    figures: credits.Balance | None = None,
) -> RunDetail:
    """A run the caller may see (`row` as get_run_row reads it), as its detail shows it. `figures`: the
    company's credit balance when this request read it already (a proposal's credit gate), else read here
    when the run waits for approval: once a request either way."""
    sources = await run_sources(row) if sources is None else sources
    withheld = contents_withheld(ctx, row, sources)
    if withheld:
        row = withhold(row, withheld)
    elif row["findings"]:  # an admin's "expected here" shown beside each finding it holds for
        row = {**row, "findings": await acknowledged.attach(ctx.company_id, row["findings"])}
    requester = known.requester if known else await _requester(ctx, row["requested_by"])
    diff = None
    if row["previous_attempt_id"]:
        prev = await Run.select(Run.code).where(Run.id == row["previous_attempt_id"]).first()
        # two codes of up to max_code_bytes each: difflib is CPU work, off the event loop
        diff = await asyncio.to_thread(code_diff, prev["code"], row["code"]) if prev else None
    blocked = None
    company = known.company if known else await gates.company(ctx.company_id, ctx)
    offer = None
    cost = None
    if row["status"] == RunStatus.awaiting_approval:
        if not row["flow_id"] and figures is None:
            figures = await credits.balance(ctx.company_id)  # read once for both
        blocked = known.blocked if known else await gates.approve_blocked(company, figures)
        if not row["flow_id"]:  # a flow reserves for all its steps at once, on its own page
            cost = await credits.approval_cost(
                ctx.company_id,
                row["requested_by"],
                holds.max_cost(row["limits"]),
                figures=figures,
                company=company,
            )
        if company["followup_without_reapproval"]:  # what approving this run would grant, said before
            fields = grant_fields(company)
            offer = GrantOffer(
                expires_at=fields[Run.followup_grant_expires_at],
                hours=company["followup_grant_hours"],
                max_runs=fields[Run.followup_grant_max_runs],
                conversation_id=row["conversation_id"],
                datasets=row["datasets"],
                file_ids=row["file_ids"],
                files=_staged_files(row),
            )
    grant = followup_grant(row, company)
    outputs = await drive.list_files(ctx, run_id=row["id"]) if row["status"] in FINISHED else []
    output_findings = await _output_findings(ctx, row, outputs) if outputs or row["result"] else []
    return RunDetail(
        **{key: row[key] for key in _STORED},
        max_attempts=max_attempts(),
        diff=diff,
        requested_by=requester,
        approval=Approval(
            kind=row["approval_kind"],
            by=row["approved_by"],
            at=row["approved_at"],
            code_sha256=row["approved_code_sha256"],
            bundle_sha256=row["approved_bundle_sha256"],
        )
        if row["approved_at"]
        else None,
        rejection=Rejection(by=row["rejected_by"], at=row["rejected_at"], reason=row["rejection_reason"])
        if row["rejected_at"]
        else None,
        followup_grant=FollowupGrant(**grant, files=_staged_files(row)) if grant is not None else None,
        followup_grant_on_approval=offer,
        # a flow's step is decided with its flow (backend/flows), never alone
        can_decide=row["status"] == RunStatus.awaiting_approval
        and can_decide(ctx, row)
        and not row["flow_id"],
        approve_blocked_reason=blocked,
        output_files=outputs,
        source_datasets=sources,
        withheld=withheld,
        output_findings=output_findings if not withheld else [],
        output_notice=outputs_scan.NOTICE if output_findings and not withheld else None,
        approval_cost=cost,
    )


async def _requester(ctx: UserContext, user_id: int) -> PersonRef:
    """Who asked for a run: the caller as their context read them this request, else read."""
    if user_id == ctx.user_id:
        return PersonRef(id=ctx.user_id, email=ctx.email, name=ctx.name)
    person = await User.select(User.id, User.email, User.name).where(User.id == user_id).first()
    assert person is not None  # a run's requester (a foreign key)
    return PersonRef(**person)


async def _output_findings(ctx: UserContext, row: dict[str, Any], outputs: list[dict[str, Any]]) -> list[Any]:
    """Instruction-like text in what a finished run handed back (backend/injection/outputs.py). A scanner error
    is logged and reported as no finding: it must not make the run unreadable."""
    if row["status"] not in FINISHED:
        return []
    # a finished run's outputs never change: scanned once per process for the same content (printed output,
    # conclusion, the text files the reader may open), not at every poll of its detail (the console's page,
    # the assistant's get_run wait). Keyed by content, so runs of other databases never share an entry.
    key = (
        sha256_text((row["result"] or {}).get("stdout") or ""),
        sha256_text(json.dumps(row.get("conclusion"), sort_keys=True, default=str)),
        tuple((f["name"], f["sha256"]) for f in outputs if outputs_scan.is_text_output(f["name"])),
    )
    if key in _SCANNED:
        return _SCANNED[key]
    found = await _scan_outputs(ctx, row, outputs)
    _SCANNED[key] = found
    while len(_SCANNED) > _SCANNED_KEPT:
        _SCANNED.pop(next(iter(_SCANNED)))
    return found


_SCANNED: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Any]] = {}
_SCANNED_KEPT = 512


async def _scan_outputs(ctx: UserContext, row: dict[str, Any], outputs: list[dict[str, Any]]) -> list[Any]:
    files: list[tuple[str, bytes]] = []
    budget = outputs_scan.MAX_TOTAL_BYTES
    for f in outputs:
        if budget <= 0 or not outputs_scan.is_text_output(f["name"]):
            continue
        try:
            _, data = await drive.read_file(ctx, f["id"])
        except NotFound:
            continue
        files.append((f["name"], data[: outputs_scan.MAX_FILE_BYTES]))
        budget -= len(files[-1][1])
    stdout = (row["result"] or {}).get("stdout")
    try:
        # through the same judging as staging, with the company's verdict cache
        with verdicts.using(DbVerdictCache(ctx.company_id)):
            return await asyncio.to_thread(outputs_scan.scan_outputs, stdout, row.get("conclusion"), files)
    except Exception:  # noqa: BLE001 - a scanner bug must not hide a run's result
        logging.getLogger(__name__).exception("scanning the outputs of run %s failed", row["id"])
        return []


# the detail's fields read as they are stored
_STORED = (
    "id",
    "title",
    "plan",
    "conversation_id",
    "status",
    "attempt",
    "previous_attempt_id",
    "created_at",
    "code",
    "code_sha256",
    "datasets",
    "file_ids",
    "manifest",
    "bundle_sha256",
    "findings",
    "limits",
    "narrowed_from",
    "followup_note",
    "schedule_id",
    "result",
    "error_message",
    "output_folder_id",
    "credits_charged",
    "actions_discarded",
    "actions_note",
    "action_items_count",
    "started_at",
    "finished_at",
    "host_id",
    "flow_id",
    "flow_step",
)
