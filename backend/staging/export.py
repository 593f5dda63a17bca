"""Scanning a dataset export for text that reads like instructions to the assistant.

Only text columns are read, and each distinct value once: business data repeats (statuses, notes, names),
and a finding of a value is reported at every row and column that holds it.
"""

from __future__ import annotations

from backend.injection import Finding, scan_cells, scan_table
from backend.records.columns import ColumnKind
from backend.records.datasets import Dataset
from backend.records.export import DatasetExport


def text_columns(dataset: Dataset) -> list[int]:
    """Indexes of the export columns that can hold prose (text; numbers, dates and the like cannot)."""
    types = dataset.export_types
    return [j for j, name in enumerate(dataset.export_columns) if types[name] is ColumnKind.string]


def scan_export(export: DatasetExport, *, path: str) -> list[Finding]:
    """Findings in the header and every text cell; each distinct value is scanned once."""
    header = export.columns
    findings = scan_table(header, [], path=path)
    columns = [(j, export.values[j]) for j in text_columns(export.dataset)]
    distinct: set[str] = set()
    for _, values in columns:
        distinct.update(values)
    values = [v for v in distinct if isinstance(v, str) and v]
    hits = {values[i]: found for i, found in scan_cells(values).items()}
    if not hits:
        return findings
    located = []
    for j, column in columns:
        for r, value in enumerate(column, start=1):
            if value in hits:
                located.extend((r, j, hit) for hit in hits[value])
    located.sort(key=lambda x: (x[0], x[1]))
    findings += [
        Finding(path=path, sheet=None, row=r, column=header[j], **hit.__dict__) for r, j, hit in located
    ]
    return findings
