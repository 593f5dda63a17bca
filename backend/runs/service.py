"""Proposal, approval, rejection, revision, reading. Execution lives in worker.py."""

from __future__ import annotations

import ast
import difflib
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.audit import service as audit
from backend.credits import service as credits
from backend.errors import AppError, Conflict, Forbidden, Invalid, NotFound
from backend.hashing import sha256_text
from backend.runs import gates
from backend.runs.tables import FINISHED, RETRYABLE, Run
from backend.settings import get_settings
from backend.staging import service as staging
from backend.tenancy.context import UserContext
from backend.tenancy.tables import User

HARD_MAX_ATTEMPTS = 5


class CodeTooLarge(AppError):
    status_code = 413
    code = "code_too_large"


def _now() -> datetime:
    return datetime.now(UTC)


def max_attempts() -> int:
    return max(1, min(get_settings().max_attempts, HARD_MAX_ATTEMPTS))


def check_code(code: str) -> None:
    limit = get_settings().max_code_bytes
    size = len(code.encode("utf-8"))
    if size > limit:
        raise CodeTooLarge(f"the code is {size:,} bytes; the limit is {limit:,} bytes")
    if not code.strip():
        raise Invalid("the code is empty")
    try:
        ast.parse(code, filename="run.py")
    except SyntaxError as exc:
        raise Invalid(
            {
                "message": f"syntax error: {exc.msg} (line {exc.lineno})",
                "line": exc.lineno,
                "offset": exc.offset,
            },
            code="syntax_error",
        ) from exc


def code_findings(code: str) -> list[dict[str, Any]]:
    """Invisible or bidi-control characters in the code itself: what the approver reads is not what runs."""
    from backend.injection import scan_text

    return [f.model_dump() for f in scan_text(code, path="run.py") if f.category == "invisible_characters"]


def check_limits(limits: dict[str, Any] | None) -> dict[str, int]:
    s = get_settings()
    caps = {"wall_seconds": s.max_wall_seconds, "memory_mib": s.max_memory_mib, "vcpus": s.max_vcpus}
    out = dict(caps)
    for key, value in (limits or {}).items():
        if key not in caps:
            raise Invalid(f"unknown limit {key!r}; valid: {sorted(caps)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Invalid(f"limit {key} must be a positive whole number")
        if value > caps[key]:
            raise Invalid(
                f"limit {key}={value} is above the operator cap of {caps[key]}; a run may only lower limits"
            )
        out[key] = value
    if out["memory_mib"] < 256:
        raise Invalid("memory_mib must be at least 256")
    return out


def bundle_root() -> Path:
    return get_settings().data_dir / "bundles"


async def _stage(ctx: UserContext, datasets: list[str], file_ids: list[int]) -> staging.StagedBundle:
    directory = bundle_root() / uuid.uuid4().hex
    return await staging.stage(ctx, datasets, file_ids, directory)


async def get_run_row(ctx: UserContext, run_id: int) -> dict[str, Any]:
    """A run the caller may see: the requester's own, or any of the company's for an admin. Else 404."""
    await gates.require_feature(ctx.company_id)
    row = (
        await Run.select()
        .where((Run.id == run_id) & (Run.company == ctx.company_id))
        .output(load_json=True)
        .first()
    )
    if row is None or not (ctx.is_admin or row["requested_by"] == ctx.user_id):
        raise NotFound(f"no run {run_id}")
    return row


def _covers(
    approved: dict[str, Any], datasets: list[str], file_ids: list[int], limits: dict[str, int]
) -> bool:
    return (
        set(datasets) <= set(approved["datasets"])
        and set(file_ids) <= set(approved["file_ids"])
        and all(limits[k] <= approved["limits"].get(k, 0) for k in limits)
    )


SYSTEM_APPROVERS = ("followup:", "schedule:")  # approvals no person gave


def grant_fields(company: dict[str, Any], now: datetime | None = None) -> dict[Any, Any]:
    """The follow-up grant a person's approval gives, per the company setting at that moment: none when
    the setting is off; else an expiry (now + followup_grant_hours) and a cap (followup_grant_max_runs)."""
    if not company["followup_without_reapproval"]:
        return {Run.followup_grant_expires_at: None, Run.followup_grant_max_runs: 0}
    now = now or _now()
    return {
        Run.followup_grant_expires_at: now + timedelta(hours=company["followup_grant_hours"]),
        Run.followup_grant_max_runs: company["followup_grant_max_runs"],
    }


def followup_grant(row: dict[str, Any], company: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The grant a run's approval gave, as the run detail shows it (None when it gave none)."""
    if row["followup_grant_expires_at"] is None or not row["followup_grant_max_runs"]:
        return None
    expires = row["followup_grant_expires_at"]
    used = row["followup_grant_used"] or 0
    active = expires > _now() and used < row["followup_grant_max_runs"]
    if company is not None:
        active = active and bool(company["followup_without_reapproval"])
    return {
        "expires_at": expires,
        "max_runs": row["followup_grant_max_runs"],
        "used": used,
        "active": active,
        "conversation_id": row["conversation_id"],
        "datasets": row["datasets"],
        "file_ids": row["file_ids"],
        "limits": row["limits"],
    }


async def _grant_refusal(
    ctx: UserContext,
    company: dict[str, Any],
    followup_of: int,
    conversation_id: str,
    datasets: list[str],
    file_ids: list[int],
    limits: dict[str, int],
) -> str | None:
    """Why run `followup_of` cannot let this follow-up skip approval (None when its grant covers it)."""
    if not company["followup_without_reapproval"]:
        return "follow-ups without re-approval are turned off for this company"
    parent = (
        await Run.select()
        .where((Run.id == followup_of) & (Run.company == ctx.company_id) & (Run.requested_by == ctx.user_id))
        .output(load_json=True)
        .first()
    )
    if parent is None:  # another company's or another user's run: say nothing about it
        return f"run {followup_of} is not one of your runs"
    if parent["conversation_id"] != conversation_id:
        return f"run {followup_of} belongs to another conversation"
    if (
        parent["approved_at"] is None
        or parent["narrowed_from"] is not None
        or parent["schedule_id"] is not None
        or (parent["approved_by"] or "").startswith(SYSTEM_APPROVERS)
    ):
        return f"run {followup_of} was not approved by a person, so it grants no follow-ups"
    if parent["followup_grant_expires_at"] is None or not parent["followup_grant_max_runs"]:
        return f"the approval of run {followup_of} granted no follow-ups (the setting was off then)"
    if parent["followup_grant_expires_at"] <= _now():
        return f"the follow-up grant of run {followup_of} expired at {parent['followup_grant_expires_at'].isoformat()}"
    if (parent["followup_grant_used"] or 0) >= parent["followup_grant_max_runs"]:
        return (
            f"the follow-up grant of run {followup_of} has been used "
            f"{parent['followup_grant_max_runs']} time(s), its limit"
        )
    wider = sorted(set(datasets) - set(parent["datasets"]))
    if wider:
        return f"this follow-up reads datasets the approval of run {followup_of} did not cover: {wider}"
    extra_files = sorted(set(file_ids) - set(parent["file_ids"]))
    if extra_files:
        return f"this follow-up reads files the approval of run {followup_of} did not cover: {extra_files}"
    if not _covers(parent, datasets, file_ids, limits):
        return f"this follow-up asks for higher limits than run {followup_of} was approved with"
    return None


async def _claim_grant(parent_id: int) -> bool:
    """Take one follow-up slot of the grant, atomically: one conditional update of the parent's counter,
    so two parallel proposals cannot both take the last slot (row lock on PostgreSQL, one writer on SQLite)."""
    claimed = (
        await Run.update({Run.followup_grant_used: Run.followup_grant_used + 1})
        .where(
            (Run.id == parent_id)
            & (Run.followup_grant_used < Run.followup_grant_max_runs)
            & (Run.followup_grant_expires_at > _now())
        )
        .returning(Run.id)
    )
    return bool(claimed)


async def propose(
    ctx: UserContext,
    *,
    conversation_id: str,
    title: str,
    plan: str,
    code: str,
    datasets: list[str],
    file_ids: list[int],
    limits: dict[str, Any] | None = None,
    actor: str | None = None,
    followup_of: int | None = None,
) -> dict[str, Any]:
    company = await gates.require_code_execution(ctx.company_id)
    check_code(code)
    run_limits = check_limits(limits)
    staging.check_datasets(ctx, datasets)
    await credits.require_minimum(ctx.company_id)
    bundle = await _stage(ctx, datasets, file_ids)
    findings = [f.model_dump() for f in bundle.findings] + code_findings(code)
    datasets = list(dict.fromkeys(d.strip() for d in datasets if d.strip()))
    file_ids = list(dict.fromkeys(file_ids))
    now = _now()
    run = Run(
        company=ctx.company_id,
        requested_by=ctx.user_id,
        conversation_id=conversation_id,
        title=title,
        plan=plan,
        code=code,
        code_sha256=sha256_text(code),
        datasets=datasets,
        file_ids=file_ids,
        limits=run_limits,
        status="awaiting_approval",
        attempt=1,
        bundle_dir=str(bundle.directory),
        bundle_sha256=bundle.bundle_sha256,
        manifest=bundle.manifest,
        findings=findings,
        created_at=now,
        updated_at=now,
    )
    await run.save()
    await Run.update({Run.root_run_id: run.id}).where(Run.id == run.id)
    actor = actor or f"assistant:{ctx.email}"
    await audit.record(
        "run.proposed",
        actor=actor,
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=run.id,
        data={
            "title": title,
            "conversation_id": conversation_id,
            "code_sha256": run.code_sha256,
            "bundle_sha256": run.bundle_sha256,
            "datasets": datasets,
            "file_ids": file_ids,
            "limits": run_limits,
            "findings": len(bundle.findings),
            "followup_of": followup_of,
        },
    )
    if followup_of is not None:
        await _followup(ctx, company, run.id, followup_of, conversation_id, datasets, file_ids, run_limits)
    return await detail(ctx, run.id)


async def _followup(
    ctx: UserContext,
    company: dict[str, Any],
    run_id: int,
    followup_of: int,
    conversation_id: str,
    datasets: list[str],
    file_ids: list[int],
    limits: dict[str, int],
) -> None:
    """A follow-up skips approval only inside the grant a person's approval of `followup_of` gave (same
    user, same conversation, unexpired, runs left, scope a subset); otherwise it waits, saying why."""
    note = await _grant_refusal(ctx, company, followup_of, conversation_id, datasets, file_ids, limits)
    if note is None and not await _claim_grant(followup_of):
        note = f"the follow-up grant of run {followup_of} expired or has no runs left"
    if note is not None:
        await Run.update({Run.followup_note: note}).where(Run.id == run_id)
        await audit.record(
            "run.followup_needs_approval",
            actor="system",
            company_id=ctx.company_id,
            subject_type="run",
            subject_id=run_id,
            data={"followup_of": followup_of, "reason": note},
        )
        return
    await _approve_row(
        run_id,
        by=f"followup:{followup_of}",
        company_id=ctx.company_id,
        narrowed_from=followup_of,
        actor="system",
    )


async def _approve_row(
    run_id: int,
    *,
    by: str,
    company_id: int,
    narrowed_from: int | None = None,
    actor: str,
    via: dict[str, Any] | None = None,
) -> None:
    row = await Run.select().where(Run.id == run_id).output(load_json=True).first()
    assert row is not None
    now = _now()
    # only a person's approval grants follow-ups (per the company setting at this moment)
    person = narrowed_from is None and not by.startswith(SYSTEM_APPROVERS)
    grant = grant_fields(await gates.company(company_id), now) if person else {}
    await Run.update(
        {
            Run.status: "queued",
            Run.approved_by: by,
            Run.approved_at: now,
            Run.approved_code_sha256: sha256_text(row["code"]),
            Run.approved_bundle_sha256: row["bundle_sha256"],
            Run.narrowed_from: narrowed_from,
            Run.updated_at: now,
            **grant,
        }
    ).where((Run.id == run_id) & (Run.status == "awaiting_approval"))
    data: dict[str, Any] = {
        "code_sha256": sha256_text(row["code"]),
        "bundle_sha256": row["bundle_sha256"],
        "by": by,
        **(via or {}),
    }
    if grant.get(Run.followup_grant_expires_at) is not None:
        data["followup_grant"] = {
            "expires_at": grant[Run.followup_grant_expires_at].isoformat(),
            "max_runs": grant[Run.followup_grant_max_runs],
        }
    action = "run.approved"
    if narrowed_from is not None:
        action = "run.followup_auto_approved"
        data["narrowed_from_run"] = narrowed_from
    await audit.record(
        action, actor=actor, company_id=company_id, subject_type="run", subject_id=run_id, data=data
    )


def _can_decide(ctx: UserContext, row: dict[str, Any]) -> bool:
    return ctx.is_person and (ctx.is_admin or row["requested_by"] == ctx.user_id)


async def approve(ctx: UserContext, run_id: int, *, code_sha256: str, bundle_sha256: str) -> dict[str, Any]:
    """A person approves exactly the code and the staged data they were shown: both hashes are required
    and must match what is stored now."""
    ctx.require_person("approving a run")
    if not code_sha256 or not bundle_sha256:
        raise Invalid(
            "approving needs code_sha256 and bundle_sha256: the hashes of the code and of the staged data "
            "you reviewed (the approval screen shows and sends them)",
            code="hashes_required",
        )
    row = await get_run_row(ctx, run_id)
    if not _can_decide(ctx, row):
        raise Forbidden("only the person who asked for this run or a company admin can approve it")
    if row["status"] != "awaiting_approval":
        raise Conflict(f"run {run_id} is {row['status']}, not awaiting approval")
    await gates.require_code_execution(ctx.company_id)
    await credits.require_minimum(ctx.company_id)
    if code_sha256 != sha256_text(row["code"]):
        raise Conflict(
            "the code changed since you looked at it; reload and review it again", code="hash_mismatch"
        )
    if bundle_sha256 != row["bundle_sha256"]:
        raise Conflict(
            "the staged data changed since you looked at it; reload and review it again", code="hash_mismatch"
        )
    await _approve_row(run_id, by=ctx.email, company_id=ctx.company_id, actor=ctx.actor, via=ctx.via())
    return await detail(ctx, run_id)


async def reject(ctx: UserContext, run_id: int, reason: str | None) -> dict[str, Any]:
    ctx.require_person("rejecting a run")
    row = await get_run_row(ctx, run_id)
    if not _can_decide(ctx, row):
        raise Forbidden("only the person who asked for this run or a company admin can reject it")
    if row["status"] != "awaiting_approval":
        raise Conflict(f"run {run_id} is {row['status']}, not awaiting approval")
    now = _now()
    await Run.update(
        {
            Run.status: "rejected",
            Run.rejected_by: ctx.email,
            Run.rejected_at: now,
            Run.rejection_reason: (reason or "").strip()[:2000] or None,
            Run.updated_at: now,
        }
    ).where(Run.id == run_id)
    await audit.record(
        "run.rejected",
        actor=ctx.email,
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=run_id,
        data={"reason": reason or "", **ctx.via()},
    )
    shutil.rmtree(row["bundle_dir"], ignore_errors=True)
    return await detail(ctx, run_id)


async def revise(ctx: UserContext, run_id: int, *, code: str, plan: str | None = None) -> dict[str, Any]:
    row = await get_run_row(ctx, run_id)
    await gates.require_code_execution(ctx.company_id)
    if row["requested_by"] != ctx.user_id:
        raise Forbidden("only the assistant of the person who asked for this run can revise it")
    if row["status"] not in RETRYABLE:
        raise Conflict(f"run {run_id} is {row['status']}; only a failed attempt can be revised")
    root = row["root_run_id"] or row["id"]
    latest = (
        await Run.select(Run.id, Run.attempt)
        .where(Run.root_run_id == root)
        .order_by(Run.attempt, ascending=False)
        .first()
    )
    if latest and latest["id"] != run_id:
        raise Conflict(f"run {run_id} is not the latest attempt; revise run {latest['id']} instead")
    cap = max_attempts()
    if row["attempt"] >= cap:
        raise Conflict(
            f"this run has used all {cap} attempts; propose a new run instead", code="attempts_exhausted"
        )
    check_code(code)
    await credits.require_minimum(ctx.company_id)
    bundle = await _stage(ctx, row["datasets"], row["file_ids"])
    now = _now()
    new = Run(
        company=ctx.company_id,
        requested_by=ctx.user_id,
        conversation_id=row["conversation_id"],
        title=row["title"],
        plan=plan if plan is not None else row["plan"],
        code=code,
        code_sha256=sha256_text(code),
        datasets=row["datasets"],
        file_ids=row["file_ids"],
        limits=row["limits"],
        status="awaiting_approval",
        attempt=row["attempt"] + 1,
        root_run_id=root,
        previous_attempt_id=run_id,
        bundle_dir=str(bundle.directory),
        bundle_sha256=bundle.bundle_sha256,
        manifest=bundle.manifest,
        findings=[f.model_dump() for f in bundle.findings] + code_findings(code),
        created_at=now,
        updated_at=now,
    )
    await new.save()
    await audit.record(
        "run.revised",
        actor=f"assistant:{ctx.email}",
        company_id=ctx.company_id,
        subject_type="run",
        subject_id=new.id,
        data={
            "previous_attempt": run_id,
            "attempt": new.attempt,
            "code_sha256": new.code_sha256,
            "bundle_sha256": new.bundle_sha256,
        },
    )
    return await detail(ctx, new.id)


def code_diff(before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            "previous attempt",
            "this attempt",
        )
    )


async def summary(row: dict[str, Any], emails: dict[int, str]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "title": row["title"],
        "status": row["status"],
        "attempt": row["attempt"],
        "conversation_id": row["conversation_id"],
        "requested_by": emails.get(row["requested_by"], ""),
        "datasets": row["datasets"],
        "file_ids": row["file_ids"],
        "created_at": row["created_at"],
        "finished_at": row["finished_at"],
        "credits_charged": row["credits_charged"],
        "findings_count": len(row["findings"] or []),
        "schedule_id": row["schedule_id"],
    }


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
) -> dict[str, Any]:
    await gates.require_feature(ctx.company_id)
    query = Run.select().where(Run.company == ctx.company_id)
    if not ctx.is_admin:
        query = query.where(Run.requested_by == ctx.user_id)
    users = await User.select(User.id, User.email).where(User.company == ctx.company_id)
    emails = {u["id"]: u["email"] for u in users}
    if user:
        ids = [i for i, e in emails.items() if e == user.strip().lower()]
        query = query.where(Run.requested_by.is_in(ids or [-1]))
    if status:
        query = query.where(Run.status == status)
    if since:
        query = query.where(Run.created_at >= since)
    if until:
        query = query.where(Run.created_at <= until)
    rows = await query.order_by(Run.id, ascending=False).output(load_json=True)
    if dataset:
        rows = [r for r in rows if dataset in (r["datasets"] or [])]
    return {"items": [await summary(r, emails) for r in rows[offset : offset + limit]], "total": len(rows)}


def _staged_file_names(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The Drive files a run staged, by id and name (from its manifest), for the follow-up grant."""
    names: dict[int, str] = {}
    for entry in (row["manifest"] or {}).get("files") or []:
        source = entry.get("source") or {}
        if source.get("type") == "drive_file" and source.get("drive_file_id") is not None:
            names.setdefault(source["drive_file_id"], source.get("name") or "")
    return [{"id": i, "name": names.get(i, "")} for i in row["file_ids"] or []]


async def detail(ctx: UserContext, run_id: int) -> dict[str, Any]:
    from backend.actions.tables import ActionItem
    from backend.drive import service as drive

    row = await get_run_row(ctx, run_id)
    requester = (
        await User.select(User.id, User.email, User.name).where(User.id == row["requested_by"]).first()
    )
    diff = None
    if row["previous_attempt_id"]:
        prev = await Run.select(Run.code).where(Run.id == row["previous_attempt_id"]).first()
        diff = code_diff(prev["code"], row["code"]) if prev else None
    blocked = None
    company = await gates.company(ctx.company_id)
    grant_offer = None
    if row["status"] == "awaiting_approval":
        blocked = await credits.blocked_reason(ctx.company_id)
        if not company["code_execution_enabled"]:
            blocked = "code execution is turned off for this company"
        if company["followup_without_reapproval"]:  # what approving this run would grant, said before
            fields = grant_fields(company)
            grant_offer = {
                "expires_at": fields[Run.followup_grant_expires_at],
                "hours": company["followup_grant_hours"],
                "max_runs": fields[Run.followup_grant_max_runs],
                "conversation_id": row["conversation_id"],
                "datasets": row["datasets"],
                "file_ids": row["file_ids"],
                "files": _staged_file_names(row),
            }
    grant = followup_grant(row, company)
    if grant is not None:
        grant["files"] = _staged_file_names(row)
    outputs = await drive.list_files(ctx, run_id=run_id) if row["status"] in FINISHED else []
    items = await ActionItem.count().where(ActionItem.run == run_id)
    return {
        "id": row["id"],
        "title": row["title"],
        "plan": row["plan"],
        "conversation_id": row["conversation_id"],
        "status": row["status"],
        "attempt": row["attempt"],
        "max_attempts": max_attempts(),
        "previous_attempt_id": row["previous_attempt_id"],
        "diff": diff,
        "requested_by": requester,
        "created_at": row["created_at"],
        "code": row["code"],
        "code_sha256": row["code_sha256"],
        "datasets": row["datasets"],
        "file_ids": row["file_ids"],
        "manifest": row["manifest"],
        "bundle_sha256": row["bundle_sha256"],
        "findings": row["findings"],
        "limits": row["limits"],
        "approval": {
            "by": row["approved_by"],
            "at": row["approved_at"],
            "code_sha256": row["approved_code_sha256"],
            "bundle_sha256": row["approved_bundle_sha256"],
        }
        if row["approved_at"]
        else None,
        "rejection": {"by": row["rejected_by"], "at": row["rejected_at"], "reason": row["rejection_reason"]}
        if row["rejected_at"]
        else None,
        "narrowed_from": row["narrowed_from"],
        "followup_grant": grant,
        "followup_grant_on_approval": grant_offer,
        "followup_note": row["followup_note"],
        "schedule_id": row["schedule_id"],
        "can_decide": row["status"] == "awaiting_approval" and _can_decide(ctx, row),
        "approve_blocked_reason": blocked,
        "result": row["result"],
        "error_message": row["error_message"],
        "output_files": outputs,
        "output_folder_id": row["output_folder_id"],
        "credits_charged": row["credits_charged"],
        "actions_discarded": row["actions_discarded"],
        "actions_note": row["actions_note"],
        "action_items_count": items,
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
    }
