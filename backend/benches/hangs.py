"""`cleanroom bench hangs`: many trivial runs through each way a guest starts, counting the ones that go silent.

A run "hangs" when its guest reported READY (the user code started) and then nothing came back until the
host's deadline (the wall limit plus the collect grace). The agent enforces the wall limit itself, so a hang
means the guest as a whole stopped making progress, not the user code. Each hang's evidence (libvirt's state,
QEMU's CPU use, the vCPU's registers and local APIC, the console's end) is kept in the report.

Settings (environment): CLEANROOM_BENCH_HANG_RUNS (per path, 200), CLEANROOM_BENCH_HANG_PARALLEL (runs at
once, 2: what two fleet workers or a flow beside a run do), CLEANROOM_BENCH_HANG_PATHS (`restore,standby`;
`cold` too, slowly; `fleet`: the API on PostgreSQL and two `cleanroom worker` hosts restoring per run, as the
fleet's tests run them, CLEANROOM_BENCH_POSTGRES_URL), CLEANROOM_BENCH_HANG_WALL (the wall limit in seconds, 10),
CLEANROOM_BENCH_HANG_LOAD (host processes kept busy meanwhile, 0: what the suite's other pytest process does to
the guests' vCPU threads), CLEANROOM_BENCH_HANG_CODE (`trivial`, or `pandas`: a frame, a sum and a chart file).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from backend.benches import summarize
from backend.sandbox.domain import guest_vcpus
from backend.sandbox.models import RunLimits, SandboxResult
from backend.sandbox.runner import run_code
from backend.sandbox.standby import start_standby_pool, stop_standby_pool
from backend.sandbox.templates import prepare_saved_states
from backend.sandbox.virt import resolve_virt_type
from backend.settings import get_settings

TRIVIAL = "import os\nprint(os.urandom(8).hex())\n"
PANDAS = (
    "import os, pandas as pd, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "frame = pd.DataFrame({'a': range(20000), 'b': [i % 7 for i in range(20000)]})\n"
    "frame.groupby('b').sum().plot()\nplt.savefig('/work/output/chart.png')\nprint(os.urandom(8).hex())\n"
)
CODES = {"trivial": TRIVIAL, "pandas": PANDAS}
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


def _busy() -> None:
    while True:
        pass


def _code() -> str:
    name = os.environ.get("CLEANROOM_BENCH_HANG_CODE", "trivial")
    if name not in CODES:
        raise ValueError(f"unknown CLEANROOM_BENCH_HANG_CODE {name!r}: choose from {', '.join(CODES)}")
    return CODES[name]


def _one(path: str, wall: int) -> SandboxResult:
    with tempfile.TemporaryDirectory(prefix="cleanroom-bench-hang-") as out:
        return run_code(
            _code(),
            input_dir=None,
            out_dir=Path(out),
            limits=RunLimits(wall_seconds=wall),
            force_cold_boot=path == "cold",
        )


def _classify(result: SandboxResult) -> str:
    lines = result.stdout.strip().splitlines()
    if result.status == "succeeded" and lines and len(lines[-1]) == 16:
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


def _fleet(
    figures: Callable[[int, int, int], dict[str, Any]] | None, runs: int, parallel: int, wall: int
) -> dict[str, Any]:
    if figures is None:
        raise ValueError("the fleet path needs the fleet's bench (cleanroom bench hangs passes it)")
    return figures(runs, parallel, wall)


def run_hang_bench(fleet_figures: Callable[[int, int, int], dict[str, Any]] | None = None) -> dict[str, Any]:
    """`fleet_figures(runs, parallel, wall)` is the fleet's path (backend/benches/workers.py), handed in by the CLI:
    the sandbox does not import the fleet."""
    runs = _env_int("CLEANROOM_BENCH_HANG_RUNS", 200)
    parallel = _env_int("CLEANROOM_BENCH_HANG_PARALLEL", 2)
    wall = _env_int("CLEANROOM_BENCH_HANG_WALL", 10)
    paths = [p.strip() for p in os.environ.get("CLEANROOM_BENCH_HANG_PATHS", "restore,standby").split(",")]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        raise ValueError(f"unknown path(s) {unknown}: choose from {', '.join(PATHS)}")
    load = int(os.environ.get("CLEANROOM_BENCH_HANG_LOAD", "0"))
    code = _code()
    prepare_saved_states(progress=lambda _msg: None)
    hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(max(0, load))]
    for hog in hogs:
        hog.start()
    evidence = _Evidence()
    watched = logging.getLogger("backend.sandbox.vm")
    watched.addHandler(evidence)
    try:
        figures = {
            path: _fleet(fleet_figures, runs, parallel, wall)
            if path == "fleet"
            else _path_figures(path, runs, parallel, wall)
            for path in paths
        }
    finally:
        watched.removeHandler(evidence)
        for hog in hogs:
            hog.kill()
    return {
        "code": code,
        "busy_host_processes": load,
        "guest_vcpus": guest_vcpus(resolve_virt_type(None)),  # resolved by prepare_saved_states above
        "load_at_end": os.getloadavg(),
        "use_saved_state": get_settings().use_saved_state,
        "paths": figures,
        "hangs": sum(f["hang"] for f in figures.values()),
        "hang_evidence": evidence.records[:10],
        "goals": {"hangs": 0},
    }
