"""Staged bundles do not outlive their use. A run's bundle is deleted when the run ends (execute.py), when it
is rejected (runs/service.py) or cancelled before it started (runs/gates.py); a run that failed after its VM
started keeps it for `failed_bundle_retention_days`, and a run whose VM ran keeps it for its company's
`evidence_retention_days` (0 by default; a re-run for evidence needs it: backend/evidence/rerun.py).
`sweep_bundles` deletes what is past that, and any bundle no run refers to (a proposal that died between
staging and saving its row) once it is a day old.

It walks the bundle folder, not the runs table: the work is bounded by what is on disk, never by history.
What an approval bound - the manifest and its hashes - stays in the run's row and the audit trail.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.evidence.rerun import kept_for_evidence
from backend.evidence.tables import IN_FLIGHT as RERUNS_IN_FLIGHT
from backend.evidence.tables import EvidenceRerun
from backend.execution.execute import keeps_bundle
from backend.runs.quotas import IN_FLIGHT
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.staging.bundle import bundle_root, remove_bundle

log = logging.getLogger("cleanroom.loop")

ORPHAN_AGE = timedelta(days=1)  # a bundle with no run: longer than any staging takes
_CHUNK = 500


def _listing(root: Path) -> list[tuple[str, float]]:
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    listing = []
    for path in entries:
        try:
            if path.is_dir() and not path.is_symlink():
                listing.append((str(path), path.stat().st_mtime))
        except OSError:
            continue
    return listing


def _expired(runs: list[dict[str, Any]], cutoff: datetime, now: datetime) -> bool:
    """Whether the bundle these runs refer to may go: every one of them ended, none failed recently enough
    to keep it for a revision, none is kept for evidence under its company's setting as it is now (turned
    off or shortened, the next sweep deletes what it no longer keeps), and none is being re-run."""
    for run in runs:
        if run["status"] in IN_FLIGHT or run.get("rerun_in_flight"):
            return False
        finished = run["finished_at"]
        if keeps_bundle(run["status"]) and (finished is None or finished > cutoff):
            return False
        days = run.get("evidence_days") or 0
        if kept_for_evidence(run["status"], run.get("flow_id"), days) and (
            finished is None or finished > now - timedelta(days=days)
        ):
            return False
    return True


async def sweep_bundles(now: datetime | None = None) -> list[str]:
    """Delete the bundles past their retention (and old orphans); returns the folders deleted."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=get_settings().failed_bundle_retention_days)
    listing = await asyncio.to_thread(_listing, bundle_root())
    by_dir: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(listing), _CHUNK):
        names = [d for d, _ in listing[start : start + _CHUNK]]
        for row in await Run.select(
            Run.id,
            Run.bundle_dir,
            Run.status,
            Run.finished_at,
            Run.flow_id,
            Run.company.evidence_retention_days.as_alias("evidence_days"),
        ).where(Run.bundle_dir.is_in(names)):
            by_dir.setdefault(row["bundle_dir"], []).append(row)
    rerunning = {
        r["run"]
        for r in await EvidenceRerun.select(EvidenceRerun.run).where(
            EvidenceRerun.status.is_in(list(RERUNS_IN_FLIGHT))
        )
    }
    for runs in by_dir.values():
        for row in runs:
            row["rerun_in_flight"] = row["id"] in rerunning
    doomed = []
    for directory, mtime in listing:
        runs = by_dir.get(directory)
        if runs is None:
            if datetime.fromtimestamp(mtime, UTC) < now - ORPHAN_AGE:
                doomed.append(directory)
        elif _expired(runs, cutoff, now):
            doomed.append(directory)
    for directory in doomed:
        await asyncio.to_thread(remove_bundle, directory)
    if doomed:
        log.info("deleted %d staged bundles past their retention", len(doomed))
    return doomed
