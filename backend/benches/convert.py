"""What the converter sandbox costs: `bench_convert()` times one small file per type three ways.

* `sandbox`: `convert_isolated` as the service runs it (bubblewrap, the drop, rlimits, seccomp);
* `no_bwrap`: the same child without bubblewrap (drop, rlimits, seccomp), for comparison only: the service
  never converts without it (no bwrap means conversion refused);
* `in_process`: `convert()` in this process, no child at all.

`overhead_ms` is sandbox minus no_bwrap at the median: what bubblewrap adds to one file. The modes take turns
within each repeat so that load from elsewhere on the machine falls on all three alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from backend.convert.isolated import convert_isolated
from backend.convert.model import Converted
from backend.convert.service import convert


def _ms(run: Callable[[], Converted]) -> float:
    start = time.perf_counter()
    converted = run()
    elapsed = (time.perf_counter() - start) * 1000
    if converted.error is not None:
        raise RuntimeError(f"the benchmark file did not convert: {converted.error}")
    return elapsed


def _modes(name: str, data: bytes) -> dict[str, Callable[[], Converted]]:
    return {
        "sandbox": lambda: convert_isolated(data, name),
        "no_bwrap": lambda: convert_isolated(data, name, bwrap=False),
        "in_process": lambda: convert(data, name),
    }


def bench_convert(samples: dict[str, tuple[str, bytes]], repeats: int = 7) -> dict[str, dict[str, float]]:
    """Per type (`samples`: type -> (file name, bytes); `backend.demo.files.conversion_samples()` has one small
    file of each): p50 milliseconds for each mode, and the p50 overhead of bubblewrap (sandbox - no_bwrap)."""
    table: dict[str, dict[str, float]] = {}
    for kind, (name, data) in samples.items():
        modes = _modes(name, data)
        for run in modes.values():  # warm-up: imports, page cache, the one-off bwrap check
            _ms(run)
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(repeats):
            for mode, run in modes.items():
                times[mode].append(_ms(run))
        row = {f"{mode}_ms": round(statistics.median(values), 1) for mode, values in times.items()}
        row["overhead_ms"] = round(row["sandbox_ms"] - row["no_bwrap_ms"], 1)
        table[kind] = row
    return table
