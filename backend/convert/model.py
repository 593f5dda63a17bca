"""What a converted Drive file looks like: tables and text, plus the limits conversion runs under."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import time
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from xml.parsers import expat

from backend.settings import get_settings

# What reading a damaged zip or XML part of a document raises (each reader adds its own): a damaged file,
# never a bug.
DAMAGED_PART_ERRORS: tuple[type[BaseException], ...] = (
    expat.ExpatError,
    zipfile.BadZipFile,
    zlib.error,
    OSError,
    EOFError,
    ValueError,
)

KINDS = ("xlsx", "ods", "csv", "pdf", "docx", "image", "text", "markdown", "json")
SPREADSHEET_KINDS = ("xlsx", "ods", "csv")

# Excel's own ceiling for one cell; anything longer is cut and warned about.
MAX_CELL_CHARS = 32_767
MAX_COLUMNS = 16_384


@dataclass(frozen=True)
class ConvertLimits:
    max_input_bytes: int = 100 * 1024 * 1024
    max_rows_per_sheet: int = 100_000
    max_cells: int = 5_000_000  # over all sheets of one file
    max_unzipped_bytes: int = 512 * 1024 * 1024  # sum of declared member sizes of an xlsx/ods
    max_zip_ratio: int = 500  # uncompressed/compressed, for members over zip_ratio_floor_bytes
    zip_ratio_floor_bytes: int = 8 * 1024 * 1024
    max_zip_members: int = 10_000
    time_limit_seconds: float = 30.0
    max_pdf_pages: int = 500
    max_image_pixels: int = 50_000_000
    max_ocr_pages: int = 20  # image frames, or PDF pages without a text layer
    max_text_chars: int = 20_000_000

    @classmethod
    def from_settings(cls) -> ConvertLimits:
        settings = get_settings()
        return cls(
            max_input_bytes=settings.max_upload_bytes,
            max_rows_per_sheet=settings.convert_max_rows_per_sheet,
            max_cells=settings.convert_max_cells,
            max_unzipped_bytes=settings.convert_max_unzipped_bytes,
            time_limit_seconds=settings.convert_time_limit_seconds,
            max_pdf_pages=settings.convert_max_pdf_pages,
            max_image_pixels=settings.convert_max_image_pixels,
            max_ocr_pages=settings.convert_max_ocr_pages,
        )


class ConversionFailed(Exception):
    """Raised inside converters; `convert()` turns it into `Converted(error=...)`. The message is shown to people."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._ends - time.monotonic())

    def check(self) -> None:
        if time.monotonic() > self._ends:
            raise ConversionFailed(
                f"Conversion took longer than the {self.seconds:g} s limit, so the file was not staged."
            )


@dataclass
class Table:
    name: str  # file name in the bundle, e.g. "q3-plan__Sheet2.csv"
    sheet: str | None  # sheet name; for PDF tables "page 2 table 1"; None for a CSV file
    hidden: bool
    header: list[str]
    rows: list[list[str]]
    truncated: bool
    total_rows: int  # data rows under the header in the source, including the ones cut off
    # Formula text aligned with the cells: formula_header[c] / formulas[r][c] is "" where the cell has
    # no formula. Empty lists when the sheet has no formulas (always for CSV and PDF tables).
    formula_header: list[str] = field(default_factory=list)
    formulas: list[list[str]] = field(default_factory=list)

    @property
    def has_formulas(self) -> bool:
        return any(self.formula_header) or any(any(row) for row in self.formulas)

    def csv_bytes(self) -> bytes:
        return rows_to_csv([self.header, *self.rows])


@dataclass
class Converted:
    kind: str = "unknown"
    tables: list[Table] = field(default_factory=list)
    text: str | None = None  # for PDFs with "--- page N ---" markers, exactly as bundled
    pages: int | None = None
    error: str | None = None
    keep_original: bool = False
    warnings: list[str] = field(default_factory=list)
    text_truncated: bool = False
    elapsed_ms: int = 0
    details: dict = field(
        default_factory=dict
    )  # e.g. {"encoding": "cp1252", "delimiter": ";"}; goes into metadata
    # Text the scanner should read that is not in a table cell: cell comments, document
    # properties of a workbook ("label: text" lines). Not bundled.
    extra_scan_text: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def bundle_files(self, stem: str) -> list[tuple[str, bytes, dict]]:
        """Text-form files for the staged bundle: (file name, content, metadata).

        `stem` is the caller's name for this file without extension ("q3-plan"); sheets become
        "<stem>__<Sheet>.csv", text "<stem>.txt" (".md", ".json" for those kinds)."""
        if self.error is not None:
            return []
        files: list[tuple[str, bytes, dict]] = []
        names = table_file_names(stem, self.tables)
        for table, name in zip(self.tables, names, strict=True):
            meta = {
                "kind": self.kind,
                "sheet": table.sheet,
                "hidden": table.hidden,
                "rows": len(table.rows),
                "total_rows": table.total_rows,
                "truncated": table.truncated,
                "columns": len(table.header),
                **self.details,
            }
            files.append((name, table.csv_bytes(), meta))
        if self.text is not None:
            suffix = {"markdown": ".md", "json": ".json"}.get(self.kind, ".txt")
            meta = {
                "kind": self.kind,
                "sheet": None,
                "hidden": False,
                "rows": self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1),
                "truncated": self.text_truncated,
                **self.details,
            }
            if self.pages is not None:
                meta["pages"] = self.pages
            name = unique_name(slug(stem) + suffix, {n.lower() for n in names})
            files.append((name, self.text.encode("utf-8"), meta))
        return files


def table_file_names(stem: str, tables: list[Table]) -> list[str]:
    base = slug(stem)
    used: set[str] = set()
    names = []
    for table in tables:
        if table.sheet is None:
            names.append(unique_name(f"{base}.csv", used))
        else:
            names.append(unique_name(f"{base}__{safe_part(table.sheet)}.csv", used))
    return names


def rows_to_csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def cell_text(value: object) -> str:
    """One cell as the text a CSV reader (and the scanner) sees."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_CELL_CHARS:
        text = text[:MAX_CELL_CHARS]
    return text


_NOT_SLUG = re.compile(r"[^a-z0-9.]+")
_NOT_PART = re.compile(r"[^A-Za-z0-9_-]+")


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def safe_stem(filename: str) -> str:
    """'Q3 plan.xlsx' -> 'q3-plan': the file name without its extension, as a slug."""
    stem = filename.rsplit("/", 1)[-1]
    if "." in stem.strip("."):
        stem = stem.rsplit(".", 1)[0]
    return slug(stem)


def slug(stem: str) -> str:
    """'Q3 plan' -> 'q3-plan', 'report.v2' -> 'report.v2': lowercase ASCII, dashes; dots kept inside."""
    text = _NOT_SLUG.sub("-", _ascii(stem).lower()).strip("-.")
    return text[:80] or "file"


def safe_part(sheet: str) -> str:
    """A sheet name as a file-name part, case kept: 'Sheet 2/β' -> 'Sheet-2-b'."""
    part = _NOT_PART.sub("-", _ascii(sheet)).strip("-")
    return part[:60] or "sheet"


def unique_name(name: str, used: set[str]) -> str:
    stem, dot, ext = name.rpartition(".")
    candidate, n = name, 2
    while candidate.lower() in used:
        candidate = f"{stem}-{n}{dot}{ext}"
        n += 1
    used.add(candidate.lower())
    return candidate


def describe(exc: BaseException) -> str:
    """An exception as a short parenthetical for a person, not a stack trace."""
    if isinstance(exc, zlib.error) or "CRC-32" in str(exc):
        return "a compressed part is corrupt"
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def pretty_json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
