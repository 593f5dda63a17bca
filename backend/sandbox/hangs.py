"""`cleanroom bench hangs`: many trivial runs through each way a guest starts, counting the ones that go silent.

A run "hangs" when its guest reported READY (the user code started) and then nothing came back until the
host's deadline (the wall limit plus the collect grace). The agent enforces the wall limit itself, so a hang
means the guest as a whole stopped making progress, not the user code. Each hang's evidence (libvirt's state,
QEMU's CPU use, the vCPU's registers and local APIC, the console's end) is kept in the report.

Settings (environment): CLEANROOM_BENCH_HANG_RUNS (per path, 200), CLEANROOM_BENCH_HANG_PARALLEL (runs at
once, 2: what two fleet workers or a flow beside a run do), CLEANROOM_BENCH_HANG_PATHS (`restore,standby`;
`cold` too, slowly; `fleet`: the API on PostgreSQL and two `cleanroom worker` hosts restoring per run, as the
fleet's tests run them, CLEANROOM_BENCH_POSTGRES_URL), CLEANROOM_BENCH_HANG_WALL (the wall limit in seconds, 10).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from backend.bench import summarize
from backend.sandbox.models import RunLimits, SandboxResult
from backend.sandbox.runner import run_code
from backend.sandbox.standby import start_standby_pool, stop_standby_pool
from backend.sandbox.templates import prepare_saved_states
from backend.settings import get_settings

TRIVIAL = "import os\nprint(os.urandom(8).hex())\n"
PATHS = ("restore", "standby", "cold", "fleet")


class _Evidence(logging.Handler):
    """Keeps what `GuestVM.wait` logs about a guest that went silent."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage()[:6000])


def _env_int(name: str, default: int) -> int:
    return max(1, int(os.environ.get(name, str(default))))


def _one(path: str, wall: int) -> SandboxResult:
    with tempfile.TemporaryDirectory(prefix="cleanroom-bench-hang-") as out:
        return run_code(
            TRIVIAL,
            input_dir=None,
            out_dir=Path(out),
            limits=RunLimits(wall_seconds=wall),
            force_cold_boot=path == "cold",
        )


def _classify(result: SandboxResult) -> str:
    if result.status == "succeeded" and len(result.stdout.strip()) == 16:
        return "ok"
    if "stopped responding" in (result.error or ""):
        return "hang"
    return "failed"


def _path_figures(path: str, runs: int, parallel: int, wall: int) -> dict[str, Any]:
    counts = {"ok": 0, "hang": 0, "failed": 0}
    totals: list[float] = []
    problems: list[dict[str, Any]] = []
    done = threading.Lock()
    finished, on_standby, restored = [0], [0], [0]
    began = time.monotonic()

    def one(index: int) -> None:
        result = _one(path, wall)
        kind = _classify(result)
        with done:
            counts[kind] += 1
            finished[0] += 1
            on_standby[0] += bool(result.vm and result.vm.standby)
            restored[0] += bool(result.vm and result.vm.restored)
            if result.timings_ms is not None:
                totals.append(result.timings_ms.total)
            if kind != "ok" and len(problems) < 20:
                problems.append(
                    {
                        "run": index,
                        "status": result.status,
                        "error": (result.error or result.stderr)[-1500:],
                        "vm": result.vm.model_dump() if result.vm else None,
                    }
                )
            if finished[0] % 10 == 0 or kind != "ok":
                print(
                    f"[hangs] {path}: {finished[0]}/{runs} ({counts}) after {time.monotonic() - began:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )

    if path == "standby":
        start_standby_pool(parallel)
    try:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            list(pool.map(one, range(runs)))
    finally:
        if path == "standby":
            stop_standby_pool()
    return {
        "runs": runs,
        "parallel": parallel,
        "wall_limit_seconds": wall,
        **counts,
        "run_ms": summarize(totals) if totals else None,
        "seconds": round(time.monotonic() - began, 1),
        "on_standby_guests": on_standby[0],
        "restored": restored[0],
        "problems": problems,
    }


def _fleet_figures(runs: int, parallel: int, wall: int) -> dict[str, Any]:
    """The same trivial run through the API and two fleet workers (one VM each at a time), `parallel`
    approved at once; a silent guest's evidence is in its worker's log."""
    from backend.fleet.bench import FleetServer, wait_finished
    from backend.runs.bench import _Session

    counts = {"ok": 0, "hang": 0, "failed": 0}
    problems: list[dict[str, Any]] = []
    evidence: list[str] = []
    began = time.monotonic()
    limits = {
        "CLEANROOM_MAX_PROPOSALS_PER_USER_PER_HOUR": str(runs + 10),
        "CLEANROOM_MAX_PROPOSALS_PER_COMPANY_PER_HOUR": str(runs + 10),
    }
    with FleetServer({"CLEANROOM_SAVED_STATE_SLOTS": "1", **limits}) as fleet:
        assert fleet.server is not None
        session = _Session(fleet.server)
        try:
            for host in ("hang_a", "hang_b"):
                fleet.start_worker(host, capacity=1)
            fleet.wait_up({"hang_a", "hang_b"})
            from backend.bench import sales_csv

            staged = [session.upload("sales.csv", sales_csv(50))]
            done = 0
            while done < runs:
                batch = []
                for _ in range(min(parallel, runs - done)):
                    r = session.assistant.post(
                        "/api/runs",
                        json={
                            "conversation_id": "hangs",
                            "title": "trivial",
                            "plan": "bench",
                            "code": TRIVIAL,
                            "files": staged,
                            "limits": {"wall_seconds": wall},
                        },
                    )
                    if r.status_code != 201:
                        raise RuntimeError(f"proposing failed: {r.status_code} {r.text[:500]}")
                    batch.append(r.json())
                for run in batch:
                    session.approve(run)
                for run_id, run in wait_finished(session.person, [r["id"] for r in batch]).items():
                    result = run.get("result") or {}
                    error = run.get("error_message") or result.get("error") or ""
                    ok = run["status"] == "succeeded" and len((result.get("stdout") or "").strip()) == 16
                    kind = "ok" if ok else "hang" if "stopped responding" in error else "failed"
                    counts[kind] += 1
                    if kind != "ok" and len(problems) < 20:
                        problems.append(
                            {
                                "run": run_id,
                                "status": run["status"],
                                "host": run.get("host_id"),
                                "error": error[-1500:],
                            }
                        )
                done += len(batch)
                print(
                    f"[hangs] fleet: {done}/{runs} ({counts}) after {time.monotonic() - began:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            session.close()
            fleet.stop_workers()
            for host, folder in fleet.dirs.items():
                log_text = (folder / "worker.log").read_text(errors="replace")
                evidence += [
                    f"{host}: {line[:6000]}" for line in log_text.splitlines() if "after READY" in line
                ]
    return {
        "runs": runs,
        "parallel": parallel,
        "wall_limit_seconds": wall,
        **counts,
        "seconds": round(time.monotonic() - began, 1),
        "problems": problems,
        "worker_evidence": evidence[:10],
    }


def run_hang_bench() -> dict[str, Any]:
    runs = _env_int("CLEANROOM_BENCH_HANG_RUNS", 200)
    parallel = _env_int("CLEANROOM_BENCH_HANG_PARALLEL", 2)
    wall = _env_int("CLEANROOM_BENCH_HANG_WALL", 10)
    paths = [p.strip() for p in os.environ.get("CLEANROOM_BENCH_HANG_PATHS", "restore,standby").split(",")]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        raise ValueError(f"unknown path(s) {unknown}: choose from {', '.join(PATHS)}")
    prepare_saved_states(progress=lambda _msg: None)
    evidence = _Evidence()
    watched = logging.getLogger("backend.sandbox.vm")
    watched.addHandler(evidence)
    try:
        figures = {
            path: _fleet_figures(runs, parallel, wall)
            if path == "fleet"
            else _path_figures(path, runs, parallel, wall)
            for path in paths
        }
    finally:
        watched.removeHandler(evidence)
    return {
        "code": TRIVIAL,
        "load_at_end": os.getloadavg(),
        "use_saved_state": get_settings().use_saved_state,
        "paths": figures,
        "hangs": sum(f["hang"] for f in figures.values()),
        "hang_evidence": evidence.records[:10],
        "goals": {"hangs": 0},
    }
