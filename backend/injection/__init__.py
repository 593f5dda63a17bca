"""Injection scanner: finds text in staged inputs that reads like instructions aimed at the assistant.

scan_table / scan_text return Findings for the approval screen; scan_cell is the per-cell primitive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend import lazy

# Loaded on first use (backend/lazy.py): a client importing `backend.injection.schemas` or `.reasons` must not
# load the scanner and its model with it.
_LAZY = {
    "CATEGORIES": "categories",
    "CellHit": "scanner",
    "scan_cell": "scanner",
    "scan_cells": "scanner",
    "scan_table": "scanner",
    "scan_text": "scanner",
    "Finding": "schemas",
    "Severity": "schemas",
}

if TYPE_CHECKING:
    from backend.injection.categories import CATEGORIES
    from backend.injection.scanner import CellHit, scan_cell, scan_cells, scan_table, scan_text
    from backend.injection.schemas import Finding, Severity

__getattr__ = lazy.exports(__name__, _LAZY)

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
