"""Scanning a dataset export for text that reads like instructions to the assistant.

Only text columns are read, and each distinct value once: business data repeats (statuses, notes, names),
and a finding of a value is reported at every row and column that holds it. An export whose bytes were
scanned a moment ago (assistants stage the same dataset run after run) is not scanned again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from backend.hashing import sha256_text
from backend.injection import Finding, scan_cells, scan_table
from backend.records.columns import ColumnKind
from backend.records.datasets import Dataset
from backend.records.export import DatasetExport


def text_columns(dataset: Dataset) -> list[int]:
    """Indexes of the export columns that can hold prose (text; numbers, dates and the like cannot)."""
    types = dataset.export_types
    return [j for j, name in enumerate(dataset.export_columns) if types[name] is ColumnKind.string]


SCANS_KEPT = 64  # the findings of this many recent exports are kept, each under its company and bytes' hash
_scans: OrderedDict[tuple[int, str, str, tuple[int, ...]], list[Finding]] = OrderedDict()
_scans_lock = threading.Lock()  # scans run in threads (staging's asyncio.to_thread)


def scan_export(export: DatasetExport, *, path: str, sha256: str, company_id: int) -> list[Finding]:
    """Findings in the header and every text cell; each distinct value is scanned once.

    `sha256`: the hash of the export's bytes (`export.csv`, as staged), staged for `company_id`. The findings
    depend on nothing but those bytes, the path they are reported at and which columns are text, so an export
    of the same company with all three the same as one of the last `SCANS_KEPT` gets that scan's findings
    (copies) without being scanned again. The company is part of the key so that how long a proposal takes
    never tells one company what another staged."""
    key = (company_id, sha256, path, tuple(text_columns(export.dataset)))
    with _scans_lock:
        kept = _scans.get(key)
        if kept is not None:
            _scans.move_to_end(key)
    if kept is None:
        kept = _scan(export, path)
        with _scans_lock:
            _scans[key] = kept
            while len(_scans) > SCANS_KEPT:
                _scans.popitem(last=False)
    return [finding.model_copy() for finding in kept]


def _scan(export: DatasetExport, path: str) -> list[Finding]:
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
                located.extend((r, j, hit, value) for hit in hits[value])
    located.sort(key=lambda x: (x[0], x[1]))
    digests = {value: sha256_text(value) for *_, value in located}  # what an acknowledgement is keyed by
    findings += [
        Finding(path=path, sheet=None, row=r, column=header[j], cell_sha256=digests[value], **hit.__dict__)
        for r, j, hit, value in located
    ]
    return findings
