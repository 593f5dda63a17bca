"""The evidence pack as one self-contained HTML page that prints well (no script, no outside resource)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

STYLE = """
body{font:13px/1.45 system-ui,sans-serif;margin:2em;color:#111;max-width:60em}
h1{font-size:20px}h2{font-size:15px;border-bottom:1px solid #999;margin-top:1.6em;break-after:avoid}
table{border-collapse:collapse;width:100%;margin:.4em 0}td,th{border:1px solid #bbb;padding:2px 5px;
text-align:left;vertical-align:top}th{background:#eee}
pre{white-space:pre-wrap;word-break:break-all;border:1px solid #ccc;padding:6px;font-size:11px;background:#fafafa}
code,.h{font-family:ui-monospace,monospace;font-size:11px;word-break:break-all}
tr,pre{break-inside:avoid}@media print{body{margin:0}a{color:inherit}}
"""


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict | list):
        return f"<code>{escape(json.dumps(value, default=str, ensure_ascii=False))}</code>"
    return escape(str(value))


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _pairs(values: dict[str, Any] | None) -> str:
    if not values:
        return "<p>none</p>"
    return (
        "<table>"
        + "".join(f"<tr><th>{escape(k)}</th><td>{_cell(v)}</td></tr>" for k, v in values.items())
        + "</table>"
    )


def render(pack: dict[str, Any]) -> str:
    run = pack["run"]
    parts = [
        f"<h1>Evidence pack: run {run['id']} — {escape(run['title'])}</h1>",
        _pairs({k: v for k, v in run.items() if k not in ("plan", "code")}),
        "<h2>Plan</h2>",
        f"<pre>{escape(run['plan'] or '')}</pre>",
        "<h2>Code</h2>",
        f"<pre>{escape(run['code'])}</pre>",
        "<h2>Revisions</h2>",
    ]
    for rev in pack["revisions"]:
        parts.append(
            f"<p>attempt {rev['attempt']} (run {rev['run_id']}, {escape(str(rev['status']))}), "
            f"code <span class=h>{rev['code_sha256']}</span></p>"
        )
        if rev["diff"]:
            parts.append(f"<pre>{escape(rev['diff'])}</pre>")
    manifest = pack["manifest"]
    parts += [
        "<h2>Manifest</h2>",
        _pairs({k: v for k, v in manifest.items() if k != "files"}),
        _table(manifest["files"], sorted({k for f in manifest["files"] for k in f})),
        "<h2>Warnings shown at approval</h2>",
        _table(
            pack["warnings_at_approval"], ["severity", "category", "path", "sheet", "row", "column", "reason"]
        ),
        "<h2>Approval</h2>",
        _pairs(pack["approval"]),
        "<h2>Rejection</h2>",
        _pairs(pack["rejection"]),
        "<h2>Isolation</h2>",
        _pairs(pack["isolation"]),
        "<h2>Outputs</h2>",
        _table(pack["outputs"], ["name", "size", "sha256"]),
        _table(pack["rejected_outputs"], ["name", "reason"]) if pack["rejected_outputs"] else "",
        "<h2>Action items</h2>",
        _table(
            pack["action_items"],
            ["id", "index", "op", "dataset", "record_id", "status", "decided_by", "decided_at"],
        ),
        "<h2>Re-runs for evidence</h2>",
        _table(
            pack.get("reruns") or [],
            ["id", "status", "requested_by", "requested_at", "printed_output_match", "all_match", "files"],
        ),
        "<h2>Audit entries</h2>",
        "<p>Each entry's hash names its line in an audit export (scripts/verify_audit_export.py verifies the export).</p>",
        _table(
            pack["audit_entries"],
            ["seq", "at", "actor", "action", "subject_id", "data", "data_withheld", "hash"],
        ),
    ]
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>Run {run['id']} evidence</title><style>{STYLE}</style></head><body>"
        + "".join(parts)
        + "</body></html>"
    )
