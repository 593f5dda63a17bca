"""Injection scanner: finds text in staged inputs that reads like instructions aimed at the assistant.

scan_table / scan_text return Findings for the approval screen; scan_cell is the per-cell primitive.
"""

from backend.injection.categories import CATEGORIES
from backend.injection.scanner import CellHit, scan_cell, scan_cells, scan_table, scan_text
from backend.injection.schemas import Finding, Severity

__all__ = [
    "CATEGORIES",
    "CellHit",
    "Finding",
    "Severity",
    "scan_cell",
    "scan_cells",
    "scan_table",
    "scan_text",
]
