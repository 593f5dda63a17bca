"""A re-run for evidence (issue 28, item 5): the exact approved code over the exact kept bundle, in a fresh
VM, its actions discarded unread; what it printed and each output file compared with the original run's."""

from __future__ import annotations

from piccolo.columns import JSON, ForeignKey, Text, Timestamptz, Varchar
from piccolo.table import Table

from backend.evidence.status import IN_FLIGHT, RerunStatus
from backend.runs.tables import Run
from backend.tenancy.tables import Company, User

__all__ = ["IN_FLIGHT", "EvidenceRerun", "RerunStatus"]


class EvidenceRerun(Table, tablename="evidence_rerun"):
    run = ForeignKey(references=Run, null=False, index=True)
    company = ForeignKey(references=Company, null=False, index=True)
    requested_by = ForeignKey(references=User, null=False)
    actor = Varchar(length=254)  # how the trail names who asked (their email)
    status = Varchar(length=20, index=True)
    created_at = Timestamptz()
    started_at = Timestamptz(null=True, default=None)
    finished_at = Timestamptz(null=True, default=None)
    # what the re-run's VM gave: status, exit code, the printed output's sha256 (never its text), each output
    # file's name, size and sha256, whether an actions.json was discarded, the isolation evidence
    outcome = JSON(null=True, default=None)
    comparison = JSON(null=True, default=None)  # evidence/rerun.py compare()
    error_message = Text(null=True, default=None)


TABLES = [EvidenceRerun]
