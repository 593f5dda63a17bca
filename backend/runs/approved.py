"""An approved job, run: the one place that checks a job against its approval and calls the sandbox.

Three executors run approved code, and all three go through here:
- the local loop (`execution/execute.py`, in the API process or `cleanroom worker --local`);
- a re-run for evidence (`execution/rerun.py`);
- a fleet host's agent (`fleet/host_agent.py`), on a bundle it fetched over HTTP.

Each first asks `approval_problem` (the code and the staged bundle on disk hashed again and compared with what
was approved: any difference, and no VM starts), then, between that and the VM, does what is its own (the
local loop re-checks the gates and audits the start, a host tells the API its VM starts), then calls
`run_approved`, which never raises: the sandbox promises a result, and anything else becomes an `error` one.

It imports no table, no service and no web framework: a fleet host loads it without the API's database.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend import sandbox
from backend.hashing import sha256_json, sha256_text
from backend.sandbox.models import SandboxResult
from backend.staging.bundle import MANIFEST, verify_bundle


@dataclass(frozen=True)
class ApprovedJob:
    """What an approval bound and what its VM needs: a run's row, or the job a fleet host claimed, with the
    folder its bundle is in on this machine."""

    code: str
    code_sha256: str | None
    approved_at: Any
    approved_code_sha256: str | None
    approved_bundle_sha256: str | None
    manifest: Mapping[str, Any] | None
    bundle_dir: Path
    limits: Mapping[str, Any] = field(default_factory=dict)
    read_actions: bool = True

    @classmethod
    def of(cls, row: Mapping[str, Any], bundle_dir: str | Path | None = None) -> ApprovedJob:
        """From a run's row (or the fields of a claimed job); `bundle_dir` when the bundle is elsewhere than
        the row says (a fleet host's own copy)."""
        return cls(
            code=row["code"],
            code_sha256=row["code_sha256"],
            approved_at=row["approved_at"],
            approved_code_sha256=row["approved_code_sha256"],
            approved_bundle_sha256=row["approved_bundle_sha256"],
            manifest=row["manifest"],
            bundle_dir=Path(bundle_dir if bundle_dir is not None else row["bundle_dir"]),
            limits=row.get("limits") or {},
            read_actions=bool(row.get("read_actions", True)),
        )


def approval_problem(job: ApprovedJob) -> str | None:
    """Why this job must not start, or None. Compares what is there now with what was approved (reads and
    hashes the whole bundle: call it off the event loop, `check`)."""
    if not job.approved_at or not job.approved_code_sha256 or not job.approved_bundle_sha256:
        return "the run has no approval"
    current_code = sha256_text(job.code)
    if current_code != job.approved_code_sha256:
        return f"the code changed after approval (approved {job.approved_code_sha256[:12]}…, now {current_code[:12]}…)"
    if job.code_sha256 != job.approved_code_sha256:
        return "the stored code hash does not match the approval"
    problem = verify_bundle(job.bundle_dir, job.approved_bundle_sha256)
    if problem:
        return f"the staged data changed after approval: {problem}"
    try:
        on_disk = json.loads((job.bundle_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return "the staged manifest is unreadable"
    if sha256_json(on_disk) != sha256_json(job.manifest):
        return "the staged manifest differs from the one shown for approval"
    return None


async def check(job: ApprovedJob) -> str | None:
    """`approval_problem`, in a thread: it re-hashes the whole bundle."""
    return await asyncio.to_thread(approval_problem, job)


async def run_approved(
    job: ApprovedJob,
    out_dir: Path,
    *,
    what: str,
    log: logging.Logger,
    read_actions: bool | None = None,
    carry_dir: Path | None = None,
    started_after: float | None = None,
) -> SandboxResult:
    """Run the approved code over its bundle in a fresh VM (in a thread) and return what came out; never
    raises. `what` names the job in the executor's `log` ("run 7", "re-run 3"); `read_actions` overrides the job's (a
    re-run reads none); a flow's step passes `carry_dir` and `started_after` (backend/flows/progress.py)."""
    try:
        return await asyncio.to_thread(
            sandbox.run_code,  # looked up now: the module's attribute, as tests stand a VM in for it
            job.code,
            input_dir=job.bundle_dir,
            out_dir=out_dir,
            limits=sandbox.RunLimits(**job.limits),
            read_actions=job.read_actions if read_actions is None else read_actions,
            carry_dir=carry_dir,
            started_after=started_after,
        )
    except Exception as exc:  # the sandbox promises a result; anything else is ours, not the run's
        log.exception("sandbox failed for %s", what)
        return SandboxResult(status="error", error=f"{type(exc).__name__}: {exc}")
