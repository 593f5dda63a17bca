"""What must hold after the soak, read from what the product left: its database (read-only, with sqlite3,
not through the product's own code), its audit trail (`cleanroom audit verify`), libvirt, /proc and the run
folder. Each check returns violations, each naming the run (or item) and what broke.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from backend.soak.deployment import Deployment

APPROVALS = ("run.approved", "run.followup_auto_approved", "run.schedule_approved")
UNSETTLED = ("queued", "running", "waiting")
NOT_APPROVED = ("awaiting_approval", "rejected")


def check_all(dep: Deployment, owners: set[str]) -> list[dict[str, Any]]:
    db = sqlite3.connect(f"file:{dep.database}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        audit = [dict(row) for row in db.execute("SELECT * FROM audit_entry ORDER BY seq")]
        for entry in audit:
            entry["data"] = json.loads(entry["data"] or "{}")
        runs = [dict(row) for row in db.execute("SELECT * FROM run")]
        found = (
            settled(runs)
            + started_and_charged_once(runs, audit, db)
            + approvals_whole(runs, audit)
            + items_applied_once(audit, db)
            + credits_match_the_trail(audit, db)
        )
    finally:
        db.close()
    return found + trail_verifies(dep) + nothing_left_behind(dep, owners)


def _by_run(audit: list[dict[str, Any]], action: str) -> Counter[int]:
    return Counter(int(e["subject_id"]) for e in audit if e["action"] == action and e["subject_id"].isdigit())


def settled(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"invariant": "every approved run ends", "run": r["id"], "status": r["status"]}
        for r in runs
        if r["status"] in UNSETTLED
    ]


def started_and_charged_once(
    runs: list[dict[str, Any]], audit: list[dict[str, Any]], db
) -> list[dict[str, Any]]:
    started = _by_run(audit, "run.started")
    charged_in_trail = _by_run(audit, "credits.charged")
    charges = Counter(row[0] for row in db.execute("SELECT run_id FROM credit_charge"))
    found = []
    for r in runs:
        rid = r["id"]
        if started[rid] > 1:
            found.append({"invariant": "no run executed twice", "run": rid, "run.started": started[rid]})
        if charges[rid] > 1 or charged_in_trail[rid] > 1:
            found.append({"invariant": "no run charged twice", "run": rid, "charges": charges[rid]})
        if charges[rid] and not started[rid]:
            found.append({"invariant": "no charge for a run that never started", "run": rid})
        if r["status"] in NOT_APPROVED and started[rid]:
            found.append({"invariant": "only approved runs start", "run": rid, "status": r["status"]})
    return found


def approvals_whole(runs: list[dict[str, Any]], audit: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's approval is all there or not at all: its row says approved exactly when the trail does, and
    a run awaiting approval or rejected carries no approval (a flow's steps are approved with their flow)."""
    approved_in_trail = Counter()
    for action in APPROVALS:
        approved_in_trail.update(_by_run(audit, action))
    found = []
    for r in runs:
        if r["flow_id"] is not None:
            continue
        in_row = r["approved_at"] is not None
        if r["status"] in NOT_APPROVED and in_row:
            found.append(
                {"invariant": "approval whole", "run": r["id"], "why": f"{r['status']} yet approved_at set"}
            )
        if in_row != bool(approved_in_trail[r["id"]]):
            found.append(
                {
                    "invariant": "approval whole",
                    "run": r["id"],
                    "why": f"approved_at {'set' if in_row else 'empty'}, approvals in the trail: "
                    f"{approved_in_trail[r['id']]}",
                }
            )
        if approved_in_trail[r["id"]] > 1:
            found.append(
                {"invariant": "approved once", "run": r["id"], "approvals": approved_in_trail[r["id"]]}
            )
    return found


def items_applied_once(audit: list[dict[str, Any]], db) -> list[dict[str, Any]]:
    """Every accepted change made its record exactly once, a rejected one never (the soak's changes each
    create a task whose title no other change uses)."""
    accepted = Counter(e["subject_id"] for e in audit if e["action"] == "action.accepted")
    tasks = Counter(row[0] for row in db.execute("SELECT title FROM task"))
    found = []
    for item_id, status, changes in db.execute("SELECT id, status, changes FROM action_item"):
        title = json.loads(changes or "{}").get("title")
        made = tasks[title] if title else 0
        want = 1 if status == "accepted" else 0
        if made != want or accepted[str(item_id)] != want:
            found.append(
                {
                    "invariant": "accepted changes apply once, rejected never",
                    "item": item_id,
                    "status": status,
                    "records_made": made,
                    "accepted_in_trail": accepted[str(item_id)],
                }
            )
    return found


def credits_match_the_trail(audit: list[dict[str, Any]], db) -> list[dict[str, Any]]:
    in_trail = defaultdict(float)
    for e in audit:
        if e["action"] == "credits.charged":
            in_trail[e["company_id"]] += float(e["data"].get("credits") or 0)
    in_table = defaultdict(float)
    for company, credits in db.execute("SELECT company, credits FROM credit_charge"):
        in_table[company] += credits
    return [
        {
            "invariant": "credits used = charges in the trail",
            "company": c,
            "used": in_table[c],
            "trail": in_trail[c],
        }
        for c in set(in_trail) | set(in_table)
        if abs(in_trail[c] - in_table[c]) > 1e-6
    ]


def trail_verifies(dep: Deployment) -> list[dict[str, Any]]:
    done = dep.cli("audit", "verify", check=False)
    if done.returncode == 0:
        return []
    return [{"invariant": "the audit chain verifies", "output": (done.stdout + done.stderr)[-1000:]}]


def nothing_left_behind(dep: Deployment, owners: set[str]) -> list[dict[str, Any]]:
    """No guest of the soak's workers outlives them: no libvirt domain they own, no QEMU process using a
    disk in the run folder, no job folder left in it."""
    from backend.sandbox.libvirt_conn import connection, domains_owned_by

    found = []
    with connection() as conn:
        for owner in sorted(owners):
            for name in domains_owned_by(conn, owner):
                found.append({"invariant": "no leftover domain", "domain": name, "owner": owner})
    run_dir = dep.data / "runs"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmdline and str(run_dir) in cmdline:
            found.append({"invariant": "no leftover QEMU", "pid": int(proc.name)})
    if run_dir.exists():
        for left in sorted(run_dir.iterdir()):
            found.append({"invariant": "no leftover job folder or disk", "path": str(left)})
    return found
