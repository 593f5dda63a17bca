"""What one run's evidence pack holds: the plan and exact code with every revision, the manifest (files,
datasets, row counts, hashes), the warnings shown at approval, who approved with which session and when, the
isolation evidence, output names and hashes, each action item and who decided it, and the audit entries that
cover the run with their chain hashes (match them against an audit export: scripts/verify_audit_export.py).

Never record contents or output contents: no printed output, no excerpt of staged data in a warning, no
proposed change's values (an audit entry's `changes` is withheld; its hash still names the exported line).
Only someone who may see the run gets it (runs.read.get_run_row). What the run made - its output and refused
files' names, sizes, hashes and reasons, its audit entries' `outputs`/`rejected_files`, its re-runs' files -
only someone who may see its contents, by the run detail's one rule (`runs.read.contents_withheld`): its
code chose those names, so they can carry data."""

from __future__ import annotations

from typing import Any

from backend.actions.tables import ActionItem
from backend.audit import service as audit
from backend.audit.schemas import OUTPUT_KEYS, VALUE_KEYS
from backend.audit.tables import AuditEntry
from backend.evidence import rerun
from backend.runs import read
from backend.runs.sources import run_sources
from backend.runs.tables import Run
from backend.tenancy.context import UserContext
from backend.tenancy.tables import User

FORMAT = 1
FINDING_KEYS = ("path", "sheet", "row", "column", "severity", "category", "reason")  # no excerpt, no span


def _finding(finding: dict[str, Any]) -> dict[str, Any]:
    return {k: finding.get(k) for k in FINDING_KEYS}


def _entry(row: dict[str, Any], *, outputs: bool) -> dict[str, Any]:
    """An entry without its values (never shown here), and without the names of what the run made unless
    `outputs` (the reader may see the run's contents)."""
    data = row["data"] if isinstance(row["data"], dict) else {}
    hidden = VALUE_KEYS if outputs else (*VALUE_KEYS, *OUTPUT_KEYS)
    withheld = sorted(k for k in data if k in hidden)
    return {
        # the company's own numbering and link (the lines of its audit export): no global seq, no prev_hash
        "seq": row["company_seq"] if row.get("company_seq") is not None else row["seq"],
        "at": row["at"],
        "actor": row["actor"],
        "action": row["action"],
        "subject_type": row["subject_type"],
        "subject_id": row["subject_id"],
        "data": {k: v for k, v in data.items() if k not in hidden},
        "data_withheld": withheld,
        "company_prev_hash": row["company_prev_hash"],
        "hash": audit.company_link(row),
    }


async def _revisions(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every attempt of this run's chain up to this one, oldest first, each with its diff to the one before."""
    root = row["root_run_id"] or row["id"]
    attempts = (
        await Run.select(Run.id, Run.attempt, Run.code, Run.code_sha256, Run.plan, Run.status, Run.created_at)
        .where(((Run.root_run_id == root) | (Run.id == root)) & (Run.company == row["company"]))
        .where(Run.attempt <= row["attempt"])
        .order_by(Run.attempt)
    )
    out, before = [], None
    for attempt in attempts:
        out.append(
            {
                "run_id": attempt["id"],
                "attempt": attempt["attempt"],
                "status": attempt["status"],
                "created_at": attempt["created_at"],
                "code_sha256": attempt["code_sha256"],
                "code": attempt["code"],
                "plan": attempt["plan"],
                "diff": read.code_diff(before, attempt["code"]) if before is not None else None,
            }
        )
        before = attempt["code"]
    return out


async def _audit_entries(
    company_id: int, run_id: int, item_ids: list[int], *, outputs: bool
) -> list[dict[str, Any]]:
    about_run = (AuditEntry.subject_type == "run") & (AuditEntry.subject_id == str(run_id))
    query = AuditEntry.select().where(AuditEntry.company_id == company_id)
    if item_ids:
        about_items = (AuditEntry.subject_type == "action_item") & AuditEntry.subject_id.is_in(
            [str(i) for i in item_ids]
        )
        query = query.where(about_run | about_items)
    else:
        query = query.where(about_run)
    rows = await query.order_by(AuditEntry.seq)
    for row in rows:
        row["data"] = audit.hashed_fields(row)["data"]
    return [_entry(row, outputs=outputs) for row in rows]


def _approval_session(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The approval as the trail recorded it: which session (or grant, or schedule), when, with which hashes."""
    for entry in entries:
        if entry["action"] in audit.RUN_APPROVALS:
            return {"action": entry["action"], "seq": entry["seq"], "hash": entry["hash"], **entry["data"]}
    return None


async def pack(ctx: UserContext, run_id: int) -> dict[str, Any]:
    row = await read.get_run_row(ctx, run_id)  # 404 for anyone who may not see the run
    requester = (
        await User.select(User.id, User.email, User.name).where(User.id == row["requested_by"]).first()
    )
    items = (
        await ActionItem.select(
            ActionItem.id,
            ActionItem.index,
            ActionItem.op,
            ActionItem.dataset,
            ActionItem.record_id,
            ActionItem.status,
            ActionItem.decided_by,
            ActionItem.decided_at,
        )
        .where(ActionItem.run == run_id)
        .order_by(ActionItem.index)
    )
    withheld = read.contents_withheld(ctx, row, await run_sources(row))
    entries = await _audit_entries(row["company"], run_id, [i["id"] for i in items], outputs=not withheld)
    result = row["result"] or {}
    manifest = row["manifest"] or {}
    return {
        "format": FORMAT,
        "run": {
            "id": row["id"],
            "title": row["title"],
            "status": row["status"],
            "conversation_id": row["conversation_id"],
            "requested_by": requester,
            "created_at": row["created_at"],
            "flow_id": row["flow_id"],
            "flow_step": row["flow_step"],
            "schedule_id": row["schedule_id"],
            "narrowed_from": row["narrowed_from"],
            "plan": row["plan"],
            "code": row["code"],
            "code_sha256": row["code_sha256"],
            "limits": row["limits"],
        },
        "revisions": await _revisions(row),
        "manifest": {
            "bundle_sha256": row["bundle_sha256"],
            "datasets": row["datasets"],
            "file_ids": row["file_ids"],
            "files": [
                {k: v for k, v in f.items() if k not in VALUE_KEYS} for f in manifest.get("files") or []
            ],
            "errors": manifest.get("errors") or [],
            "source_datasets": row["source_datasets"],
        },
        "warnings_at_approval": [_finding(f) for f in row["findings"] or []],
        "approval": {
            "kind": row["approval_kind"],
            "by": row["approved_by"],
            "at": row["approved_at"],
            "code_sha256": row["approved_code_sha256"],
            "bundle_sha256": row["approved_bundle_sha256"],
            "recorded": _approval_session(entries),
        }
        if row["approved_at"]
        else None,
        "rejection": {"by": row["rejected_by"], "at": row["rejected_at"]} if row["rejected_at"] else None,
        "isolation": {
            "host_id": row["host_id"],
            "vm_started_at": row["vm_started_at"],
            "started_at": row["started_at"],
            "finished_at": row["finished_at"],
            "status": result.get("status"),
            "exit_code": result.get("exit_code"),
            "vm": result.get("vm"),
            "timings_ms": result.get("timings_ms"),
            # who says what `vm` and `timings_ms` hold: a fleet host's account is its own, the API cannot check it
            "vm_reported_by": (
                f"fleet host {row['host_id']} (self-reported: not verified by the API)"
                if row["host_id"]
                else "the API's embedded worker"
            ),
        },
        "outputs": [
            {"name": f.get("name"), "size": f.get("size"), "sha256": f.get("sha256")}
            for f in ([] if withheld else result.get("files") or [])
        ],
        "rejected_outputs": [
            {"name": f.get("name"), "reason": f.get("reason")}
            for f in ([] if withheld else result.get("rejected_files") or [])
        ],
        "outputs_withheld": withheld,
        "action_items": items,
        "actions_discarded": row["actions_discarded"],
        "credits_charged": row["credits_charged"],
        "audit_entries": entries,
        "reruns": await rerun.for_pack(row["id"], row["company"], withheld=withheld),
    }
