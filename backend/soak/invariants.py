"""What must hold after the soak, read from what the product left: its database (read-only, with sqlite3,
not through the product's own code), its audit trail (`cleanroom audit verify`), libvirt, /proc and the run
folder. Each check returns violations, each naming the run (or item) and what broke.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.audit.service import RUN_APPROVALS as APPROVALS
from backend.soak.deployment import Deployment

UNSETTLED = ("queued", "running", "waiting")
NOT_APPROVED = ("awaiting_approval", "rejected")


def check_all(dep: Deployment) -> list[dict[str, Any]]:
    db = dep.connect()
    try:
        audit = rows(db, "SELECT * FROM audit_entry ORDER BY seq")
        for entry in audit:
            entry["data"] = _json(entry["data"])
        runs = rows(db, "SELECT * FROM run")
        found = (
            settled(runs)
            + started_and_charged_once(runs, audit, db)
            + approvals_whole(runs, audit)
            + items_applied_once(audit, db)
            + credits_match_the_trail(audit, db)
        )
        if dep.mode == "fleet":
            found += no_job_left_doing(db)
    finally:
        db.close()
    return found + trail_verifies(dep) + nothing_left_behind(dep, dep.seen)


def times_to_settle(dep: Deployment, since: float) -> list[float]:
    """For every run that ended after `since` (unix seconds: the end of the last fault), how long after it
    it ended: what the runs in flight at the last fault took to settle."""
    db = dep.connect()
    try:
        ended = [
            r["finished_at"] for r in rows(db, "SELECT finished_at FROM run WHERE finished_at IS NOT NULL")
        ]
    finally:
        db.close()
    seconds = [_unix(t) - since for t in ended]
    return sorted(s for s in seconds if s >= 0)


def _unix(value: Any) -> float:
    """A timestamp column: ISO text from SQLite, a datetime from PostgreSQL."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def rows(db: Any, sql: str) -> list[dict[str, Any]]:
    """Rows as dicts from sqlite3 or psycopg alike."""
    cursor = db.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _json(value: Any) -> Any:
    """A JSON column: text from SQLite, already decoded from PostgreSQL."""
    return json.loads(value or "{}") if isinstance(value, str | bytes) or value is None else value


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
        title = _json(changes).get("title")
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


def no_job_left_doing(db: Any) -> list[dict[str, Any]]:
    """Once everything settled and the hosts stopped, procrastinate holds no job as `doing`."""
    return [
        {"invariant": "no job left doing", "job": job["id"], "run": _json(job["args"]).get("run_id")}
        for job in rows(db, "SELECT id, args FROM procrastinate_jobs WHERE status = 'doing'")
    ]


def trail_verifies(dep: Deployment) -> list[dict[str, Any]]:
    done = dep.cli("audit", "verify", check=False)
    if done.returncode == 0:
        return []
    return [{"invariant": "the audit chain verifies", "output": (done.stdout + done.stderr)[-1000:]}]


def nothing_left_behind(dep: Deployment, owners: set[str]) -> list[dict[str, Any]]:
    """No guest of the soak's workers outlives them: no libvirt domain they own, no QEMU process using a
    disk in a run folder of the deployment, no job folder left in one."""
    from backend.sandbox.libvirt_conn import connection, domains_owned_by

    found = []
    with connection() as conn:
        for owner in sorted(owners):
            for name in domains_owned_by(conn, owner):
                found.append({"invariant": "no leftover domain", "domain": name, "owner": owner})
    run_dirs = [str(folder) for folder in dep.run_dirs()]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmdline and any(folder in cmdline for folder in run_dirs):
            found.append({"invariant": "no leftover QEMU", "pid": int(proc.name)})
    for folder in dep.run_dirs():
        if folder.exists():
            for left in sorted(folder.iterdir()):
                found.append({"invariant": "no leftover job folder or disk", "path": str(left)})
    return found
