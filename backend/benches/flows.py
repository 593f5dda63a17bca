"""`cleanroom bench flow`: what a flow's step costs on top of its own work, through the product itself.

A real API server (`cleanroom serve --no-console` on a fresh demo database, its worker running real VMs),
with standby guests in the service and without them (a saved state restored per step). The assistant's
token proposes a flow of five trivial steps, each handing a conclusion to the next; a person approves it
over HTTP. Per flow:

- step overhead: from the moment the host saw step k's guest READY to the moment it saw step k+1's
  (`timings_ms.ready_unix_ms`): step k's code, its collection and filing, the hand-over to the next step,
  the next step's pickup, re-hash and a fresh VM ready. The goal is ≤ 1.0 s per step under software
  emulation (the seed's gVisor pods: 0.75 s warm);
- the hand-over alone: step k's `finished_at` → step k+1's VM ready;
- approve → the whole flow `succeeded`, seen over the API.

A flow's step never takes a standby guest that was waiting while the previous step's VM existed
(backend/flows/progress.py), so with a pool of one the next step usually restores its own.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any

from backend.benches import ApiServer, summarize
from backend.benches.service import SETTLE_SECONDS, _Session

STEPS = 5
STEP_CODE = """\
import json, os
seen = sorted(os.listdir("/work/flow"))
json.dump({"step": STEP, "seen": seen}, open("/work/output/conclusion.json", "w"))
print(STEP, seen)
"""
FLOW_FINISHED = {"succeeded", "failed", "rejected"}


def _flows() -> int:
    return max(2, int(os.environ.get("CLEANROOM_BENCH_RUNS", "5")))


def _one_flow(session: _Session, file_id: int, failures: list[str]) -> dict[str, list[float]]:
    steps = [
        {
            "title": f"step {k}",
            "code": STEP_CODE.replace("STEP", str(k)),
            "datasets": [],
            "files": [file_id] if k == 1 else [],
            "capability": "read",
        }
        for k in range(1, STEPS + 1)
    ]
    body = {"conversation_id": "bench", "title": "bench flow", "plan": "bench", "steps": steps}
    r = session.assistant.post("/api/flows", json=body)
    if r.status_code != 201:
        raise RuntimeError(f"proposing the flow failed: {r.status_code} {r.text[:500]}")
    flow = r.json()
    hashes = [{k: s["run"][k] for k in ("code_sha256", "bundle_sha256")} for s in flow["steps"]]
    time.sleep(SETTLE_SECONDS)
    started = time.perf_counter()
    session.person.post(f"/api/flows/{flow['id']}/approve", json={"steps": hashes}).raise_for_status()
    deadline = time.monotonic() + 600
    while True:
        done = session.person.get(f"/api/flows/{flow['id']}").json()
        if done["status"] in FLOW_FINISHED:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"flow {flow['id']} did not finish in 600 s")
        time.sleep(0.02)
    total_ms = (time.perf_counter() - started) * 1000
    if done["status"] != "succeeded":
        failures.append(
            f"flow {flow['id']}: "
            + ", ".join(f"{s['run']['status']} {s['run']['error_message'] or ''}" for s in done["steps"])
        )
        return {"approve_to_flow_succeeded_ms": [total_ms]}
    runs = [s["run"] for s in done["steps"]]
    ready = [r["result"]["timings_ms"]["ready_unix_ms"] for r in runs]
    ended = [datetime.fromisoformat(r["finished_at"]).timestamp() * 1000 for r in runs]
    return {
        "step_overhead_ready_to_next_ready_ms": [b - a for a, b in zip(ready, ready[1:], strict=False)],
        "hand_over_finished_to_next_ready_ms": [b - a for a, b in zip(ended, ready[1:], strict=False)],
        "approve_to_flow_succeeded_ms": [total_ms],
        "standby_steps": [float(sum(1 for r in runs if r["result"]["vm"].get("standby")))],
    }


def _measure(mode: str, flows: int) -> dict[str, Any]:
    failures: list[str] = []
    samples: dict[str, list[float]] = {}
    with ApiServer({"CLEANROOM_STANDBY_IN_SERVICE": mode}) as server:
        session = _Session(server)
        try:
            file_id = session.upload("sales.csv", b"region,amount\neast,1\nwest,2\n")
            _one_flow(session, file_id, failures)  # warm-up: saved states, first imports
            failures.clear()
            for _ in range(flows):
                for name, values in _one_flow(session, file_id, failures).items():
                    samples.setdefault(name, []).extend(values)
        finally:
            session.close()
    report: dict[str, Any] = {name: summarize(values) for name, values in samples.items() if values}
    report["failures"] = failures[:20]
    return report


def run_flow_bench() -> dict[str, Any]:
    from backend.sandbox import ensure_image

    ensure_image(progress=lambda _message: None)
    flows = _flows()
    report: dict[str, Any] = {"steps_per_flow": STEPS, "flows": flows}
    for label, mode in (("with_standby", "on"), ("without_standby", "off")):
        report[label] = _measure(mode, flows)
    report["goal_p50_ms"] = {"step_overhead_ready_to_next_ready": 1000}
    return report
