"""The data staged for a run: the manifest's table and the bundle's hash."""

from __future__ import annotations

from typing import Any

from nicegui import ui

from backend.runs.schemas import RunDetail
from backend.staging.manifest import Manifest
from console.widgets.loading import empty_state, error_box
from console.widgets.text import human_bytes, number, reveal_invisible, section


def bundle_hash(run: RunDetail) -> str | None:
    """The staged data's hash as the page shows it: what an approval sends back."""
    return run.bundle_sha256 or Manifest.of(run.manifest).bundle_sha256


def manifest_rows(manifest: Manifest) -> list[dict[str, Any]]:
    """The manifest as the rows of its table (the dicts here are the table's rows, not the API's JSON)."""
    rows = []
    for index, entry in enumerate(manifest.files):
        source = entry.source
        if source.type == "dataset":
            what = f"dataset {source.dataset}"
        elif source.type == "drive_file":
            what = f"file {source.name}"
            if entry.sheet:
                what += f" › {entry.sheet}" + (" (hidden sheet)" if entry.hidden else "")
        else:
            what = "Cleanroom"
        total = entry.visible_total if "visible_total" in entry.model_fields_set else entry.total_rows
        rows_text = number(entry.rows) if entry.rows is not None else "—"
        truncated = f"yes: {number(entry.rows)} of {number(total)} rows staged" if entry.truncated else "no"
        rows.append(
            {
                "key": index,
                "source": reveal_invisible(what),
                "path": reveal_invisible(entry.path),
                "kind": entry.kind or "",
                "rows": rows_text,
                "truncated": truncated,
                "size": human_bytes(entry.bytes),
                "hash": (entry.sha256 or "")[:12],
            }
        )
    return rows


MANIFEST_COLUMNS = [
    {"name": "source", "label": "Dataset or file", "field": "source", "align": "left"},
    {"name": "path", "label": "Staged as", "field": "path", "align": "left"},
    {"name": "kind", "label": "Kind", "field": "kind", "align": "left"},
    {"name": "rows", "label": "Rows", "field": "rows", "align": "right"},
    {"name": "truncated", "label": "Truncated", "field": "truncated", "align": "left"},
    {"name": "size", "label": "Size", "field": "size", "align": "right"},
    {"name": "hash", "label": "sha256", "field": "hash", "align": "left"},
]


def manifest_section(run: RunDetail, title: str = "Data staged for this run") -> None:
    manifest = Manifest.of(run.manifest)
    with section(title, "inventory_2", "manifest"):
        rows = manifest_rows(manifest)
        if rows:
            ui.table(rows=rows, columns=MANIFEST_COLUMNS, row_key="key").props(
                "dense flat bordered wrap-cells :rows-per-page-options=[0]"
            ).classes("w-full").mark("manifest-table")
        else:
            empty_state("Nothing staged.")
        for error in manifest.errors:
            name = error.name if "name" in error.model_fields_set else "?"
            error_box(f"{name} could not be converted: {error.error}")
        for warning in manifest.warnings:
            name = reveal_invisible(str(warning.name if "name" in warning.model_fields_set else "?"))
            ui.label(f"{name}: {warning.warning}").classes("text-warning").mark("manifest-warning")
        truncated = [r for r in rows if r["truncated"] != "no"]
        if truncated:
            ui.label(
                f"{len(truncated)} input(s) were cut at the row cap: the code sees only the first rows."
            ).classes("text-warning font-medium").mark("truncation-note")
        if bundle := bundle_hash(run):
            ui.label(f"bundle sha256 {bundle}").classes("text-xs text-grey-7 font-mono break-all").mark(
                "bundle-hash"
            )
