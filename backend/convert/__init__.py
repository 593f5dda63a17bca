"""File conversion: Drive files (spreadsheets, PDFs, images and scans, text) to the text a run reads.

`convert(data, filename)` in-process, `convert_isolated(...)` in a child process with hard ceilings,
`sniff_kind(data, filename)` for what a file is. Knows nothing of Drive, staging or the database.
"""

from backend.convert.isolated import convert_isolated
from backend.convert.model import KINDS, ConversionFailed, Converted, ConvertLimits, Table
from backend.convert.service import cells_for_scan, convert, text_for_scan
from backend.convert.sniff import TEXT_EXTENSIONS, sniff_kind

__all__ = [
    "KINDS",
    "TEXT_EXTENSIONS",
    "ConversionFailed",
    "ConvertLimits",
    "Converted",
    "Table",
    "cells_for_scan",
    "convert",
    "convert_isolated",
    "sniff_kind",
    "text_for_scan",
]
