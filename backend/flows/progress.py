"""A flow from one step to the next, on the worker's side.

* `carry_in`: right before a step's VM, what it is handed: every earlier step's conclusion and the outputs
  it named, copied from the flow's store into a folder of its own that becomes /work/flow (read-only).
  With them it inherits their sources: the step's `source_datasets` (what its outputs, its conclusion and
  what it hands on are tagged with) are its own and every earlier step's, stored on its run with the carry.
* `collect`: when a step's VM is gone, its conclusion (JSON, within its cap) and the outputs later steps
  named go into the flow's store; a conclusion over its cap or a named output missing fails the step.
* `step_ended`: called by every path that ends a run (`wire()` hooks it into `runs.ended` at start-up): a
  success queues the next step, anything else skips the rest; the flow ends with its last step. Nothing of
  a step that did not succeed reaches a later one.

The store (data_dir/flows/<flow>/) holds only what was handed on and is removed when the flow ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from backend import clock, filemodes
from backend.audit import service as audit
from backend.flows.tables import Flow, FlowStatus
from backend.hashing import sha256_file
from backend.runs import ended, gates, queued
from backend.runs.sources import run_sources, staged_sources
from backend.runs.tables import Run, RunStatus
from backend.settings import get_settings
from backend.staging.bundle import remove_bundle

log = logging.getLogger("cleanroom.flows")

CONCLUSION = "conclusion.json"
# nesting a conclusion may have: past about 250 levels it could not be shown (the JSON encoders stop), past
# about 1000 not even parsed (Python's recursion limit); a conclusion is a summary, not a tree
CONCLUSION_MAX_DEPTH = 64


def store(flow_id: int) -> Path:
    return get_settings().data_dir / "flows" / str(int(flow_id))


def carry_dir(run: dict[str, Any]) -> Path:
    """Where step k's /work/flow is assembled on the API's host (a fleet worker fetches it from there)."""
    return store(run["flow_id"]) / f"in-{run['flow_step']}-run-{int(run['id'])}"


async def inherited_sources(run: dict[str, Any]) -> set[str]:
    """The sources of every earlier step of the run's flow: each earlier conclusion reaches step k, so all
    of them count, whether or not step k receives a file of theirs. None outside a flow."""
    if run.get("flow_id") is None:
        return set()
    earlier = (
        await Run.select(Run.company, Run.datasets, Run.file_ids, Run.source_datasets)
        .where((Run.flow_id == run["flow_id"]) & (Run.flow_step < run["flow_step"]))
        .output(load_json=True)
    )
    names: set[str] = set()
    for row in earlier:
        names.update(await run_sources(row))
    return names


async def step_sources(run: dict[str, Any]) -> list[str]:
    """What step k's results are computed from: its own staged data and every earlier step's sources."""
    return sorted(await staged_sources(run) | await inherited_sources(run))


async def flow_sources(runs: list[dict[str, Any]]) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """For every run of one flow (all of them, read once): its own sources (`run_sources`), and what its
    results are computed from (stored when it was handed its carry; before that `step_sources`: its own
    staged data and every earlier step's sources, from the same rows)."""
    own = {run["id"]: await run_sources(run) for run in runs}
    inherits = {}
    for run in runs:
        if run["source_datasets"] is not None:
            inherits[run["id"]] = own[run["id"]]
            continue
        earlier = (set(own[e["id"]]) for e in runs if e["flow_step"] < run["flow_step"])
        inherits[run["id"]] = sorted(set(own[run["id"]]).union(*earlier))
    return own, inherits


async def carry_in(run: dict[str, Any]) -> tuple[Path, float | None]:
    """Build step k's /work/flow: step-<j>/conclusion.json of every earlier step that wrote one, and
    step-<j>/<name> for each output it receives. Recorded on the run, with the sources it inherits, and in
    the audit trail. Also says when the previous step ended (its VM already gone): step k's VM must not be
    older than that."""
    k, flow_id = run["flow_step"], run["flow_id"]
    root = store(flow_id)
    target = carry_dir(run)
    await asyncio.to_thread(shutil.rmtree, target, True)
    wanted = {(r["step"], r["name"]) for r in run["receives"] or []}

    def build() -> list[dict[str, Any]]:
        filemodes.private_dir(target)
        carried = []
        for j in range(1, k):
            source = root / f"step-{j}"
            names = [CONCLUSION] + sorted(n for (s, n) in wanted if s == j)
            for name in names:
                path = source / name
                if not path.is_file():
                    continue
                dest = filemodes.private_dir(target / f"step-{j}") / name
                filemodes.copy_private(path, dest)
                carried.append(
                    {"name": f"step-{j}/{name}", "sha256": sha256_file(dest), "size": dest.stat().st_size}
                )
        return carried

    carried = await asyncio.to_thread(build)
    sources = await step_sources(run)
    await Run.update({Run.carried: carried, Run.source_datasets: sources}).where(Run.id == run["id"])
    await audit.record(
        "flow.step_handed",
        actor=audit.run_actor(run["id"]),
        company_id=run["company"],
        subject_type="flow",
        subject_id=flow_id,
        data={"step": k, "run_id": run["id"], "carried": carried, "source_datasets": sources},
    )
    previous = (
        await Run.select(Run.finished_at)
        .where((Run.flow_id == flow_id) & (Run.flow_step == k - 1) & (Run.status == RunStatus.succeeded))
        .first()
    )
    ended = previous["finished_at"].timestamp() if previous and previous["finished_at"] else None
    return target, ended


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _later_wants(later: list[dict[str, Any]], k: int) -> list[str]:
    return sorted({r["name"] for step in later for r in step["receives"] or [] if r["step"] == k})


def _collect_files(run: dict[str, Any], out_dir: Path, names: list[str], cap: int) -> tuple[Any, str | None]:
    """(parsed conclusion or None, why the step fails or None); copies what is handed on into the store."""
    conclusion = None
    path = out_dir / CONCLUSION
    if path.is_file() and not path.is_symlink():
        size = path.stat().st_size
        if size > cap:
            return None, (
                f"{CONCLUSION} is {size:,} bytes; a step's conclusion may be at most {cap:,} bytes "
                "(hand larger results on as named output files)"
            )
        try:
            conclusion = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return None, f"{CONCLUSION} is not valid JSON: {exc}"
        except RecursionError:  # the parser's own limit: far deeper than a conclusion may be
            conclusion = None
            depth = CONCLUSION_MAX_DEPTH + 1
        else:
            depth = json_depth(conclusion)
        if depth > CONCLUSION_MAX_DEPTH:
            return None, (
                f"{CONCLUSION} nests lists and objects more than {CONCLUSION_MAX_DEPTH} levels deep; a "
                "conclusion may nest at most that deep (hand larger results on as named output files)"
            )
    missing = [n for n in names if not (out_dir / n).is_file() or (out_dir / n).is_symlink()]
    if missing:
        return None, (
            "later steps receive "
            + ", ".join(repr(n) for n in missing)
            + " from this step, but it did not write "
            + ("them" if len(missing) > 1 else "it")
            + " to /work/output"
        )
    target = filemodes.private_dir(store(run["flow_id"]) / f"step-{run['flow_step']}")
    if conclusion is not None:
        filemodes.copy_private(path, target / CONCLUSION)
    for name in names:
        filemodes.copy_private(out_dir / name, target / name)
    return conclusion, None


async def collect(run: dict[str, Any], result: Any, out_dir: Path) -> None:
    """After step k's VM: keep its conclusion and what later steps receive from it, or fail the step (a
    conclusion over its cap or not JSON, a named output not written). A step that did not succeed hands
    nothing on."""
    if result.status != "succeeded":
        return
    later = (
        await Run.select(Run.receives)
        .where((Run.flow_id == run["flow_id"]) & (Run.flow_step > run["flow_step"]))
        .output(load_json=True)
    )
    names = _later_wants(later, run["flow_step"])
    cap = get_settings().flow_conclusion_max_bytes
    conclusion, problem = await asyncio.to_thread(_collect_files, run, out_dir, names, cap)
    if problem:
        result.status = "failed"
        result.error = problem
        return
    await Run.update({Run.conclusion: conclusion}).where(Run.id == run["id"])


async def flow_title(flow_id: int | None) -> str:
    """A flow's title for its steps' charge lines ("" outside a flow)."""
    if flow_id is None:
        return ""
    row = await Flow.select(Flow.title).where(Flow.id == flow_id).first()
    return row["title"] if row else ""


async def action_cap_problem(run: dict[str, Any], proposed: int) -> str | None:
    """Why step k's actions.json becomes no items: the flow's cap on items over all its steps."""
    flow = await Flow.select(Flow.action_cap).where(Flow.id == run["flow_id"]).first()
    cap = flow["action_cap"] if flow else 20
    rows = await Run.select(Run.action_items_count).where(
        (Run.flow_id == run["flow_id"]) & (Run.id != run["id"])
    )
    earlier = sum(r["action_items_count"] or 0 for r in rows)
    if earlier + proposed > cap:
        return (
            f"this step proposed {proposed} action items and earlier steps {earlier}; a flow may propose at "
            f"most {cap} (the company's flow action cap), so none of this step's were kept"
        )
    return None


def wire() -> None:
    """Flows follow their steps' ends: hooks `step_ended` into `runs.ended`. Called at start-up wherever runs
    end (`create_app`, the worker's start, `drain`); calling it again changes nothing."""
    ended.on_end(step_ended)


async def step_ended(run_id: int, status: str) -> None:
    """The flow moves on after one of its steps ended with `status` (no-op for a run outside a flow). A
    success queues the next step only while the gates stand (`gates.gate_problem`, the rule a run's start
    checks): with one closed, the next step is cancelled with the reason and the rest are skipped. The
    flow ends once none of its steps is queued or running (a step a fleet host still runs while its
    successors were cancelled ends it), `failed` unless every later step succeeded."""
    run = await Run.select(Run.id, Run.company, Run.flow_id, Run.flow_step).where(Run.id == run_id).first()
    if run is None or run["flow_id"] is None:
        return
    flow_id, k = run["flow_id"], run["flow_step"]
    steps = (
        await Run.select(Run.id, Run.company, Run.flow_step, Run.status, Run.bundle_dir)
        .where((Run.flow_id == flow_id) & (Run.flow_step > k) & (Run.status == RunStatus.waiting))
        .order_by(Run.flow_step)
    )
    if status == RunStatus.succeeded and steps:
        nxt = steps[0]
        reason = await gates.gate_problem(run["company"])
        if reason is None:
            await Run.update({Run.status: RunStatus.queued, Run.updated_at: clock.now()}).where(
                (Run.id == nxt["id"]) & (Run.status == RunStatus.waiting)
            )
            queued.announce()
            return
        # a gate closed while this step ran (in a fleet the switch's cancelling found the next step waiting
        # only if it ran before this end): the next step never starts, and the flow stops at it
        if await gates.cancel_unstarted(nxt, reason, actor=audit.run_actor(nxt["id"]), announce=False):
            await step_ended(nxt["id"], RunStatus.cancelled)
        return
    now = clock.now()
    for step in steps:  # a step that did not succeed: the later ones never run
        done = await (
            Run.update(
                {
                    Run.status: RunStatus.skipped,
                    Run.finished_at: now,
                    Run.updated_at: now,
                    Run.error_message: f"skipped: step {k} ended {status}, so the flow stopped",
                }
            )
            .where((Run.id == step["id"]) & (Run.status == RunStatus.waiting))
            .returning(Run.id)
        )
        if done:
            await asyncio.to_thread(remove_bundle, step["bundle_dir"])
    in_flight = await Run.count().where(
        (Run.flow_id == flow_id)
        & (Run.id != run_id)
        & Run.status.is_in([RunStatus.queued, RunStatus.running])
    )
    if in_flight:  # its end ends the flow
        return
    stopped_later = status == RunStatus.succeeded and await Run.exists().where(
        (Run.flow_id == flow_id) & (Run.flow_step > k) & (Run.status != RunStatus.succeeded)
    )
    final = FlowStatus.succeeded if status == RunStatus.succeeded and not stopped_later else FlowStatus.failed
    ended = await (
        Flow.update({Flow.status: final, Flow.finished_at: now, Flow.updated_at: now})
        .where((Flow.id == flow_id) & (Flow.status == FlowStatus.running))
        .returning(Flow.id)
    )
    await asyncio.to_thread(shutil.rmtree, store(flow_id), True)
    if ended:
        await audit.record(
            "flow.finished",
            actor=audit.run_actor(run_id),
            company_id=run["company"],
            subject_type="flow",
            subject_id=flow_id,
            data={
                "status": final,
                "last_step": k,
                "step_status": status,
                "skipped_steps": [s["flow_step"] for s in steps],
            },
        )


async def resume_stalled() -> list[int]:
    """At the worker's start: a flow left between two steps (the service stopped after a step ended and
    before the next was queued) moves on as if that step had just ended. Returns the flows moved on."""
    moved = []
    for flow in await Flow.select(Flow.id).where(Flow.status == FlowStatus.running):
        steps = (
            await Run.select(Run.id, Run.flow_step, Run.status)
            .where(Run.flow_id == flow["id"])
            .order_by(Run.flow_step)
            .order_by(Run.id)
        )
        latest = {s["flow_step"]: s for s in steps}  # a step's latest run
        ordered = [latest[k] for k in sorted(latest)]
        if any(s["status"] in (RunStatus.queued, RunStatus.running) for s in ordered):
            continue
        ended = [s for s in ordered if s["status"] not in (RunStatus.waiting, RunStatus.awaiting_approval)]
        if ended:
            await step_ended(ended[-1]["id"], ended[-1]["status"])
            moved.append(flow["id"])
    return moved
