"""One soak: deploy, run the workload while the nemesis strikes, let it settle, stop, check the invariants.

The nemesis runs in a thread of its own, so requests are in flight when a fault lands. Fault moments are
drawn from the seed (exponential gaps around `fault_every` seconds); the workload's choices from the same
seed. Runs take as long as the guests take, so two soaks with one seed do the same things in the same
order, not at the same instants.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections import Counter
from typing import Any

from backend.soak import invariants
from backend.soak.deployment import Deployment, FleetDeployment
from backend.soak.nemesis import FAULTS, chosen_faults
from backend.soak.workload import History, Workload

MODES = {"embedded": Deployment, "fleet": FleetDeployment}


class Nemesis(threading.Thread):
    def __init__(self, dep: Deployment, faults: list[str], seed: int, every: float, history: History) -> None:
        super().__init__(name="soak-nemesis", daemon=True)
        self.dep, self.faults, self.every, self.history = dep, faults, every, history
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.injected: list[dict[str, Any]] = []
        self.last_fault_end: float | None = None
        self.last_fault_end_wall = 0.0  # the same moment, in unix seconds (to compare with the database)

    def run(self) -> None:
        while not self.stopping.wait(self.rng.expovariate(1 / self.every)):
            name = self.rng.choice(self.faults)
            began = time.monotonic()
            try:
                outcome = FAULTS[name](self.dep, self.rng)
            except Exception as exc:  # noqa: BLE001 - a fault that cannot be undone is itself a finding
                outcome = f"{type(exc).__name__}: {exc}"
            self.last_fault_end, self.last_fault_end_wall = time.monotonic(), time.time()
            record = {"fault": name, "outcome": outcome, "seconds": round(self.last_fault_end - began, 1)}
            self.injected.append(record)
            self.history.add("fault", **record)


def soak(
    seconds: float,
    seed: int,
    mode: str = "embedded",
    faults: list[str] | None = None,
    fault_every: float = 20.0,
    settle_seconds: float = 600.0,
    keep: bool = False,
    progress=print,
) -> dict[str, Any]:
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not built yet; modes: {', '.join(MODES)}")
    from backend.benches.workers import _admin_url

    faults = chosen_faults(mode, faults, _admin_url)
    dep = MODES[mode]()
    history = History()
    try:
        progress(f"soak: seeding a demo company in {dep.root} (data disk of its own: {dep.tmpfs})")
        dep.seed()
        dep.start()
        work = Workload(dep, random.Random(seed), history)
        nemesis = Nemesis(dep, faults, seed + 1, fault_every, history)
        nemesis.start()
        began = time.monotonic()
        steps = 0
        while time.monotonic() - began < seconds:
            work.step()
            steps += 1
            dep.owner_tokens()
            for host in dep.supervise():
                history.add("host_restarted", host=host)
            if steps % 50 == 0:
                progress(
                    f"soak: {time.monotonic() - began:.0f}/{seconds:.0f} s, {len(work.runs)} runs, "
                    f"{len(nemesis.injected)} faults"
                )
            time.sleep(work.rng.uniform(0.2, 1.0))
        nemesis.stopping.set()
        nemesis.join()
        if not dep.api_up():
            dep.start()
        progress(
            f"soak: workload over, {len(nemesis.injected)} faults; waiting for every approved run to end"
        )
        work.sign_in()
        work.end_schedule()
        settle_began = time.monotonic()
        while work.unsettled() and time.monotonic() - settle_began < settle_seconds:
            work.refresh()
            dep.owner_tokens()
            dep.supervise()
            time.sleep(1.0)
        settled_in = time.monotonic() - settle_began
        since_last_fault = time.monotonic() - (nemesis.last_fault_end or settle_began)
        unsettled = work.unsettled()
        settle_times = (
            invariants.times_to_settle(dep, nemesis.last_fault_end_wall) if nemesis.injected else []
        )
        stuck = dep.stop()
        violations = invariants.check_all(dep)
        if stuck is not None:
            violations.append({"invariant": "the worker ends once its API is gone", "worker": stuck})
        for run_id in unsettled:
            violations.append({"invariant": "settles within the bound", "run": run_id})
        for v in violations:
            if "run" in v:
                v["history"] = history.of_run(v["run"])
        statuses = Counter(r["status"] for r in work.runs.values())
        summary = {
            "mode": mode,
            "seed": seed,
            "seconds": seconds,
            "faults": dict(Counter(f["fault"] for f in nemesis.injected)),
            "faults_total": len(nemesis.injected),
            "fault_seconds_p50": _p50([f["seconds"] for f in nemesis.injected]),
            "runs": len(work.runs),
            "runs_by_status": dict(statuses),
            "done": dict(
                Counter(
                    e["event"]
                    for e in history.events
                    if e["event"] not in ("no_answer", "refused", "status", "fault")
                )
            ),
            "refused": _refusals(history),
            "requests_unanswered": sum(1 for e in history.events if e["event"] == "no_answer"),
            "settled_after_workload_s": round(settled_in, 1),
            "settled_after_last_fault_s": round(since_last_fault, 1),
            # each run that ended after the last fault: how long after it (p50 and the slowest)
            "runs_settled_after_last_fault": len(settle_times),
            "settle_after_last_fault_p50_s": _p50(settle_times),
            "settle_after_last_fault_max_s": round(max(settle_times), 1) if settle_times else None,
            "api_starts": dep.starts,
            "hosts_that_ended_on_their_own": dep.exits,
            "violations": violations,
            "ok": not violations,
            "data": str(dep.root) if keep else None,
        }
        if keep:  # the whole history beside the deployment's folder, for a look afterwards
            with open(dep.root / "history.jsonl", "w") as out:
                out.writelines(json.dumps(e, default=str) + "\n" for e in history.events)
        return summary
    finally:
        dep.kill_api()  # after an error too (after a clean stop, nothing is left to kill)
        if not keep:
            dep.remove()


def _refusals(history: History) -> list[dict[str, Any]]:
    """Requests the API refused (4xx), by kind, with the first answer of each: most are the product doing
    its job (a gate, a conflict); an unexpected one is a lead."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for e in history.events:
        if e["event"] == "refused":
            key = (e.get("request", ""), e.get("status", 0))
            seen.setdefault(key, {"request": key[0], "status": key[1], "count": 0, "first": e.get("body")})
            seen[key]["count"] += 1
    return list(seen.values())


def _p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None
