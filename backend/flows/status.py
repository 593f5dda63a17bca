"""A flow's status and a step's capability: the words the API, the console and MCP share.

No Piccolo here: clients import this without the tables (`backend/flows/tables.py` re-exports it).
"""

from __future__ import annotations

from enum import StrEnum


class FlowStatus(StrEnum):
    awaiting_approval = "awaiting_approval"
    rejected = "rejected"
    running = "running"  # approved: its steps run one after the other
    succeeded = "succeeded"  # every step succeeded
    failed = "failed"  # a step did not succeed; the later ones were skipped


class Capability(StrEnum):
    """What a step may do besides computing: `read` (its actions.json is discarded unread) or
    `propose_writes` (its actions become action items, each accepted by a person)."""

    read = "read"
    propose_writes = "propose_writes"


FLOW_FINISHED = (FlowStatus.rejected, FlowStatus.succeeded, FlowStatus.failed)
