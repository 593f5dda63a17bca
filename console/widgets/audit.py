"""Audit entries as a table, each subject linked to its page where it has one."""

from __future__ import annotations

import json

from nicegui import ui

from backend.audit.schemas import AuditEntryInfo
from console.widgets.loading import empty_state
from console.widgets.text import when

SUBJECT_PAGES = {"run": "/runs/", "flow": "/flows/"}  # subjects with a page of their own in the console
SUBJECT_SLOT = r"""
<q-td :props="props">
  <a v-if="props.row.link" :href="props.row.link" class="text-primary">{{ props.value }}</a>
  <span v-else>{{ props.value }}</span>
</q-td>
"""


def subject_link(entry: AuditEntryInfo) -> str:
    """The console page of an audit entry's subject (a run or a flow), or "" when it has none."""
    page = SUBJECT_PAGES.get(entry.subject_type or "")
    subject_id = str(entry.subject_id or "")
    return f"{page}{subject_id}" if page and subject_id.isdigit() else ""


def audit_table(entries: list[AuditEntryInfo]) -> None:
    if not entries:
        empty_state("No audit entries.")
        return
    rows = [
        {
            "seq": e.seq,
            "at": when(e.at),
            "actor": e.actor,
            "action": e.action,
            "subject": f"{e.subject_type or ''} {e.subject_id or ''}".strip(),
            "link": subject_link(e),
            "data": json.dumps(e.data or {}, default=str)[:300],
        }
        for e in entries
    ]
    table = ui.table(
        rows=rows,
        columns=[
            {"name": "seq", "label": "#", "field": "seq", "align": "right"},
            {"name": "at", "label": "When", "field": "at", "align": "left", "classes": "text-no-wrap"},
            {"name": "actor", "label": "Who", "field": "actor", "align": "left"},
            {"name": "action", "label": "What", "field": "action", "align": "left"},
            {
                "name": "subject",
                "label": "Subject",
                "field": "subject",
                "align": "left",
                "classes": "text-no-wrap",
            },
            {"name": "data", "label": "Details", "field": "data", "align": "left"},
        ],
        row_key="seq",
    )
    table.props("dense flat bordered wrap-cells").classes("w-full").mark("audit-table")
    table.add_slot("body-cell-subject", SUBJECT_SLOT)
