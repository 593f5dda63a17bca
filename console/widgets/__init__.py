"""Small UI pieces the pages share, one module per component: statuses, loading (and `LoadedView`, the one
skeleton of a part of a page read from the API), text, excerpts, code, the staged data's manifest, injection
findings, a run's outputs and the audit table. The pages call them as `widgets.x` (`from console import
widgets`): each is named here."""

from console.widgets.audit import SUBJECT_PAGES, SUBJECT_SLOT, audit_table, subject_link
from console.widgets.code import (
    CODE_PATH,
    LONG_LINE,
    SPACE_RUN,
    code_block,
    code_findings,
    code_lines,
    code_section,
    diff_block,
    wide_line_chips,
    wide_lines,
)
from console.widgets.excerpt import DECODES_TO, ELLIPSIS, EXCERPT_CONTEXT, Excerpt, excerpt_parts
from console.widgets.findings import (
    READER_LOCALE,
    SEVERITY_ORDER,
    Acknowledge,
    finding_reason,
    finding_row,
    findings_section,
    location,
    output_findings_section,
)
from console.widgets.loading import (
    FAILED,
    FEATURE_OFF,
    LoadedView,
    call,
    empty_state,
    error_box,
    load_into,
    loading,
)
from console.widgets.manifest import MANIFEST_COLUMNS, bundle_hash, manifest_rows, manifest_section
from console.widgets.outputs import (
    PHASES,
    PREVIEW_LIMIT,
    output_file,
    outputs_section,
    pretty_json,
    printed_output,
    timings_text,
)
from console.widgets.reason import reason_dialog
from console.widgets.status import ACTIVE_STATUSES, NO_OUTPUTS, RUN_STATUSES, STATUS_COLORS, status_badge
from console.widgets.text import human_bytes, number, pre, reveal_invisible, run_title, section, when

__all__ = [
    "ACTIVE_STATUSES",
    "Acknowledge",
    "CODE_PATH",
    "DECODES_TO",
    "ELLIPSIS",
    "EXCERPT_CONTEXT",
    "Excerpt",
    "FAILED",
    "FEATURE_OFF",
    "LONG_LINE",
    "LoadedView",
    "MANIFEST_COLUMNS",
    "NO_OUTPUTS",
    "PHASES",
    "PREVIEW_LIMIT",
    "READER_LOCALE",
    "RUN_STATUSES",
    "SEVERITY_ORDER",
    "SPACE_RUN",
    "STATUS_COLORS",
    "SUBJECT_PAGES",
    "SUBJECT_SLOT",
    "audit_table",
    "bundle_hash",
    "call",
    "code_block",
    "code_findings",
    "code_lines",
    "code_section",
    "diff_block",
    "empty_state",
    "error_box",
    "excerpt_parts",
    "finding_reason",
    "finding_row",
    "findings_section",
    "human_bytes",
    "load_into",
    "loading",
    "location",
    "manifest_rows",
    "manifest_section",
    "number",
    "output_file",
    "output_findings_section",
    "outputs_section",
    "pre",
    "pretty_json",
    "reason_dialog",
    "printed_output",
    "reveal_invisible",
    "run_title",
    "section",
    "status_badge",
    "subject_link",
    "timings_text",
    "when",
    "wide_line_chips",
    "wide_lines",
]
