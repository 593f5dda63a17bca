"""An action item's status: the words the API, the console and MCP share.

No Piccolo here: clients import this without the tables (`backend/actions/tables.py` re-exports it).
"""

from __future__ import annotations

from enum import StrEnum


class ItemStatus(StrEnum):
    pending = "pending"  # waiting for a person to accept or reject it
    accepted = "accepted"
    rejected = "rejected"
    invalid = "invalid"  # the entry could not become a change (its problem says why)
    conflict = "conflict"  # the record changed since it was staged; nothing was written
