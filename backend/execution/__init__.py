"""Carrying approved runs out on this machine: through the sandbox, at most N VMs at once.

`loop` orders the queued runs (companies in turn) and holds the run loop (`RunLoop`) that also fires due
schedules; `process` runs that loop in a process of its own (`cleanroom worker --local`, supervised by
`cleanroom serve`); `rerun` runs a re-run for evidence; `execute` takes one run from queued to finished: hashes and gates checked again right before a
VM starts, the sandbox, then the charge, outputs to Drive and actions.json to action items; `retention`
deletes staged bundles past their retention (at start and periodically). The embedded default runs this
loop inside the API process.
"""

from backend.execution.execute import execute, hash_problem, recover
from backend.execution.loop import RUN_LOOP, drain, queued_ids, start_loop, stop_loop
from backend.execution.retention import sweep_bundles

__all__ = [
    "RUN_LOOP",
    "drain",
    "execute",
    "hash_problem",
    "queued_ids",
    "recover",
    "start_loop",
    "stop_loop",
    "sweep_bundles",
]
