"""`cleanroom bench sandbox`: start-up and end-to-end figures of real runs (medians and p95)."""

from __future__ import annotations

import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from backend.bench import summarize
from backend.sandbox.models import RunLimits, SandboxResult
from backend.sandbox.runner import run_code
from backend.sandbox.standby import standby_ready, start_standby_pool, stop_standby_pool
from backend.sandbox.templates import prepare_saved_states

TRIVIAL = "print(1)\n"
PANDAS_CHART = """
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv("/work/input/sales.csv")
totals = df.groupby("region")["amount"].sum().sort_values()
ax = totals.plot.bar()
ax.set_ylabel("amount")
plt.tight_layout()
plt.savefig("/work/output/by_region.png")
print(totals.to_string())
"""


def _runs() -> int:
    return max(10, int(os.environ.get("CLEANROOM_BENCH_RUNS", "10")))


def _cold_runs() -> int:
    return max(1, int(os.environ.get("CLEANROOM_BENCH_COLD_RUNS", "10")))


def _write_sales_csv(path: Path, rows: int = 5000) -> None:
    rng = random.Random(7)
    regions = ["north", "south", "east", "west", "central"]
    lines = ["id,region,amount"] + [f"{i},{rng.choice(regions)},{rng.randint(10, 5000)}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")


def _one(code: str, input_dir: Path | None = None, **kwargs: Any) -> SandboxResult:
    with tempfile.TemporaryDirectory(prefix="cleanroom-bench-") as out:
        return run_code(
            code, input_dir=input_dir, out_dir=Path(out), limits=RunLimits(wall_seconds=60), **kwargs
        )


def _wait_for_standby(timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while standby_ready() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)


def _check(result: SandboxResult, failures: list[str]) -> None:
    if result.status != "succeeded":
        failures.append(f"{result.status}: {result.error or result.stderr[-300:]}")


def run_sandbox_bench() -> dict[str, Any]:
    prepare_saved_states(progress=lambda _msg: None)
    failures: list[str] = []
    ready, trivial, restore, restored = [], [], [], 0
    for _ in range(_runs()):
        result = _one(TRIVIAL)
        _check(result, failures)
        ready.append(result.timings_ms.start)
        trivial.append(result.timings_ms.total)
        restore.append(result.vm.restore_ms or 0.0)
        restored += result.vm.restored
    with tempfile.TemporaryDirectory(prefix="cleanroom-bench-in-") as input_dir:
        _write_sales_csv(Path(input_dir) / "sales.csv")
        pandas_chart = []
        for _ in range(_runs()):
            result = _one(PANDAS_CHART, Path(input_dir))
            _check(result, failures)
            if not any(f.name == "by_region.png" for f in result.files):
                failures.append("pandas chart run produced no PNG")
            pandas_chart.append(result.timings_ms.total)
    cold = []
    for _ in range(_cold_runs()):
        result = _one(TRIVIAL, force_cold_boot=True)
        _check(result, failures)
        cold.append(result.timings_ms.total)
    concurrent, all_four_ok = [], True
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(_runs()):
            begun = time.monotonic()
            results = list(pool.map(lambda _i: _one(TRIVIAL), range(4)))
            concurrent.append((time.monotonic() - begun) * 1000)
            for result in results:
                _check(result, failures)
            all_four_ok &= all(r.status == "succeeded" for r in results)
    standby_trivial, standby_ready_ms, standby_chart = [], [], []
    start_standby_pool(2)
    try:
        with tempfile.TemporaryDirectory(prefix="cleanroom-bench-in-") as input_dir:
            _write_sales_csv(Path(input_dir) / "sales.csv")
            for code, inputs, samples in (
                (TRIVIAL, None, standby_trivial),
                (PANDAS_CHART, Path(input_dir), standby_chart),
            ):
                for _ in range(_runs()):
                    _wait_for_standby()
                    result = _one(code, inputs)
                    _check(result, failures)
                    if not result.vm.standby:
                        failures.append("standby run did not use a standby guest")
                    samples.append(result.timings_ms.total)
                    if code is TRIVIAL:
                        standby_ready_ms.append(result.timings_ms.start)
    finally:
        stop_standby_pool()
    virt_type = result.vm.virt_type
    return {
        "virt_type": virt_type,
        "vm_ready_ms": summarize(ready),
        "restore_call_ms": summarize(restore),
        "trivial_run_ms": summarize(trivial),
        "pandas_chart_run_ms": summarize(pandas_chart),
        "cold_boot_run_ms": summarize(cold),
        "concurrent_4_runs_ms": summarize(concurrent),
        "concurrent_4_all_succeeded": all_four_ok,
        "with_standby_pool": {
            "note": (
                "opt-in standby pool (start_standby_pool): guests restored ahead of the request, one run each;"
                " the run worker does not start it"
            ),
            "request_to_ready_ms": summarize(standby_ready_ms),
            "trivial_run_ms": summarize(standby_trivial),
            "pandas_chart_run_ms": summarize(standby_chart),
        },
        "restored_fraction": round(restored / len(trivial), 2),
        "failures": failures[:20],
        "goals": {"vm_ready_ms_p50": 600, "trivial_run_ms_p50": 1000, "pandas_chart_run_ms_p50": 3000},
    }
