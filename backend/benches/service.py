"""`cleanroom bench service`: the run loop through the product itself, timed from the person's approval.

Two real API servers in turn (`cleanroom serve --no-console` on a fresh demo database, its worker running
real VMs): one whose worker keeps standby guests (`CLEANROOM_STANDBY_IN_SERVICE=on`) and one that restores a
saved state per run (`off`). In each, the assistant's token proposes and a person approves over HTTP, and:

- approve → user code starts: from the host's clock just before the approve request to the moment the
  host saw the guest READY (the result's `timings_ms.ready_unix_ms`; the agent starts the user code right
  after writing READY). The run's code also prints the guest's `time.time_ns()` first, but under software
  emulation the guest clock runs slow, so that figure (`guest_clock_...`) is shown for comparison only;
- approve → `succeeded` seen over the API (polled every 20 ms), for a trivial run and for a pandas groupby
  on 5,000 staged rows with a PNG chart;
- eight runs approved at once: all succeed, and they start in the order they were approved (FIFO), with the
  longest wait from approval to start.

Each figure is p50/p95 and, where a bare host run exists, a ratio to `python script.py` on the host for the
same script (the cost of isolation and of the service around it).
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

import httpx

from backend.benches import ApiServer, host_python_ms, ratio, sales_csv, summarize

PERSON = "maria@acme.example"
FINISHED = {"succeeded", "failed", "error", "timeout", "cancelled", "rejected"}
POLL_SECONDS = 0.02
SETTLE_SECONDS = 3.0  # between samples: the standby pool refills, the last guest's QEMU is gone
TRIVIAL = "import time\nprint(time.time_ns(), flush=True)\n"
CHART = """\
import time
print(time.time_ns(), flush=True)
import glob
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

path = glob.glob("/work/input/**/sales*.csv", recursive=True)[0]
df = pd.read_csv(path)
totals = df.groupby("region")["amount"].sum().sort_values()
ax = totals.plot.bar()
ax.set_ylabel("amount")
plt.tight_layout()
plt.savefig("/work/output/by_region.png")
print(len(df), "rows")
print(totals.to_string())
"""


def _samples() -> int:
    return max(3, int(os.environ.get("CLEANROOM_BENCH_RUNS", "10")))


class _Session:
    """The person (a browser session) and her assistant (a bearer token) on one server."""

    def __init__(self, server: ApiServer) -> None:
        self.person = httpx.Client(base_url=server.url, headers={"Origin": server.url}, timeout=120)
        self.person.post("/api/auth/login", json={"email": PERSON, "password": "demo"}).raise_for_status()
        token = self.person.post("/api/me/tokens", json={"name": "bench"}).json()["token"]
        self.assistant = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
        )

    def upload(self, name: str, data: bytes) -> int:
        r = self.person.post("/api/drive/files", files={"file": (name, data, "text/csv")})
        r.raise_for_status()
        return r.json()["id"]

    def propose(self, title: str, code: str, files: list[int]) -> dict[str, Any]:
        r = self.assistant.post(
            "/api/runs",
            json={"conversation_id": "bench", "title": title, "plan": "bench", "code": code, "files": files},
        )
        if r.status_code != 201:
            raise RuntimeError(f"proposing {title!r} failed: {r.status_code} {r.text[:500]}")
        return r.json()

    def approve(self, run: dict[str, Any]) -> None:
        hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
        self.person.post(f"/api/runs/{run['id']}/approve", json=hashes).raise_for_status()

    def wait(self, run_id: int, timeout: float = 300.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.person.get(f"/api/runs/{run_id}").json()
            if run["status"] in FINISHED:
                return run
            time.sleep(POLL_SECONDS)
        raise RuntimeError(f"run {run_id} did not finish in {timeout:.0f} s")

    def close(self) -> None:
        self.person.close()
        self.assistant.close()


def _first_line_ns(run: dict[str, Any]) -> int:
    stdout = (run.get("result") or {}).get("stdout") or ""
    return int(stdout.split("\n", 1)[0])


def _timed(
    session: _Session,
    code: str,
    files: list[int],
    failures: list[str],
    phases: dict[str, list[float]] | None = None,
) -> tuple[float, float]:
    """(approve → user code's first statement, approve → succeeded seen over the API) in ms; with `phases`,
    where the time went (`_phases`)."""
    run = session.propose("bench", code, files)
    time.sleep(SETTLE_SECONDS)
    approved_ns = time.time_ns()
    started = time.perf_counter()
    session.approve(run)
    finished = session.wait(run["id"])
    seen_ns = time.time_ns()
    done_ms = (time.perf_counter() - started) * 1000
    if finished["status"] != "succeeded":
        failures.append(f"run {run['id']}: {finished['status']} {finished.get('error_message')}")
        return float("nan"), done_ms
    if phases is not None:
        for name, value in _phases(finished, approved_ns, seen_ns).items():
            phases.setdefault(name, []).append(value)
    if phases is not None:
        phases.setdefault("guest_clock_approve_to_first_print_ms", []).append(
            (_first_line_ns(finished) - approved_ns) / 1e6
        )
    ready_ms = finished["result"]["timings_ms"].get("ready_unix_ms")
    return (ready_ms - approved_ns / 1e6) if ready_ms else float("nan"), done_ms


def _phases(run: dict[str, Any], approved_ns: int, seen_ns: int) -> dict[str, float]:
    """approve → succeeded cut where the run records its own times: the worker's pickup (approve request →
    `started_at`), the sandbox (request → VM ready → code → collected: the result's timings), the host's work
    around it (re-hash, gates, audit, filing outputs, the charge: the rest of `started_at` → `finished_at`),
    and the API noticing (`finished_at` → the poll that saw it)."""
    started_ns = datetime.fromisoformat(run["started_at"]).timestamp() * 1e9
    finished_ns = datetime.fromisoformat(run["finished_at"]).timestamp() * 1e9
    sandbox = run["result"]["timings_ms"]
    worker_ms = (finished_ns - started_ns) / 1e6
    return {
        "pickup_ms": (started_ns - approved_ns) / 1e6,
        "sandbox_vm_ready_ms": sandbox["start"],
        "sandbox_execute_ms": sandbox["execute"],
        "sandbox_collect_ms": sandbox["collect"],
        "sandbox_total_ms": sandbox["total"],
        "host_around_sandbox_ms": worker_ms - sandbox["total"],
        "seen_over_api_ms": (seen_ns - finished_ns) / 1e6,
    }


def _queued_eight(session: _Session, file_id: int, failures: list[str]) -> dict[str, Any]:
    runs = [session.propose(f"queued {i}", TRIVIAL, [file_id]) for i in range(8)]
    time.sleep(SETTLE_SECONDS)
    started = time.perf_counter()
    for run in runs:
        session.approve(run)
    finished = [session.wait(run["id"]) for run in runs]
    makespan = (time.perf_counter() - started) * 1000
    details = [session.person.get(f"/api/runs/{run['id']}").json() for run in runs]
    approved = [datetime.fromisoformat(d["approval"]["at"]) for d in details]
    began = [datetime.fromisoformat(d["started_at"]) for d in details]
    for run in finished:
        if run["status"] != "succeeded":
            failures.append(f"queued run {run['id']}: {run['status']} {run.get('error_message')}")
    return {
        "all_succeeded": all(run["status"] == "succeeded" for run in finished),
        "started_in_approval_order": began == sorted(began),
        "approve_to_start_wait_ms": summarize(
            [(b - a).total_seconds() * 1000 for a, b in zip(approved, began, strict=True)]
        ),
        "all_eight_done_ms": round(makespan, 1),
    }


def _measure(mode: str, runs: int, csv: bytes) -> dict[str, Any]:
    failures: list[str] = []
    with ApiServer({"CLEANROOM_STANDBY_IN_SERVICE": mode}) as server:
        session = _Session(server)
        try:
            file_id = session.upload("sales.csv", csv)
            _timed(session, TRIVIAL, [file_id], failures)  # warm-up: saved states, first imports
            to_code, trivial, chart, phases = [], [], [], {}
            for _ in range(runs):
                code_ms, done_ms = _timed(session, TRIVIAL, [file_id], failures, phases)
                to_code.append(code_ms)
                trivial.append(done_ms)
            for _ in range(runs):
                chart.append(_timed(session, CHART, [file_id], failures)[1])
            queued = _queued_eight(session, file_id, failures)
        finally:
            session.close()
    clean = [value for value in to_code if value == value]  # NaN for a run that failed
    return {
        "approve_to_user_code_ms": summarize(clean) if clean else None,
        "approve_to_succeeded_trivial_ms": summarize(trivial),
        "trivial_phases_p50_ms": {name: summarize(values)["p50"] for name, values in phases.items()},
        "approve_to_succeeded_pandas_chart_ms": summarize(chart),
        "eight_queued": queued,
        "failures": failures[:20],
    }


def run_service_bench() -> dict[str, Any]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)
    runs = _samples()
    csv = sales_csv()
    host_trivial = summarize(host_python_ms(TRIVIAL, {}, runs))
    host_chart = summarize(host_python_ms(CHART, {"sales.csv": csv}, runs))
    report: dict[str, Any] = {
        "host_python_trivial_ms": host_trivial,
        "host_python_pandas_chart_ms": host_chart,
    }
    for label, mode in (("with_standby", "on"), ("without_standby", "off")):
        figures = _measure(mode, runs, csv)
        figures["ratio_p50_trivial_vs_host_python"] = ratio(
            figures["approve_to_succeeded_trivial_ms"]["p50"], host_trivial["p50"]
        )
        figures["ratio_p50_pandas_chart_vs_host_python"] = ratio(
            figures["approve_to_succeeded_pandas_chart_ms"]["p50"], host_chart["p50"]
        )
        report[label] = figures
    report["goals_p50_ms"] = {
        "approve_to_user_code_with_standby": 250,
        "approve_to_user_code_without_standby": 600,
        "trivial_end_to_end": 600,
        "pandas_chart_end_to_end": 2500,
    }
    return report
