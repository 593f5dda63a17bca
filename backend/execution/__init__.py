"""The queue and worker: approved runs go through the sandbox, at most N VMs at once.

`queue` orders the queued runs (companies in turn) and holds the in-process loop that also fires due
schedules; `execute` takes one run from queued to finished: hashes and gates checked again right before a
VM starts, the sandbox, then the charge, outputs to Drive and actions.json to action items; `retention`
deletes staged bundles past their retention (at start and periodically). The embedded default runs this
loop inside the API process.
"""

from backend.execution.execute import execute, hash_problem, recover
from backend.execution.queue import WORKER, drain, queued_ids, start_worker, stop_worker
from backend.execution.retention import sweep_bundles

__all__ = [
    "WORKER",
    "drain",
    "execute",
    "hash_problem",
    "queued_ids",
    "recover",
    "start_worker",
    "stop_worker",
    "sweep_bundles",
]
