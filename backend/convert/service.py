"""Drive files to text on the way into a run: the one entry point is `convert(data, filename)`.

The type comes from the content (`sniff.sniff_kind`). Bad input never raises: it comes back as
`Converted(error=...)` with a sentence a person can act on. Work is bounded by `ConvertLimits` (bytes,
rows, cells, zip expansion, pages, pixels, wall time). `isolated.convert_isolated` runs the same conversion
in a child process with a hard wall-clock and memory ceiling; staging untrusted uploads uses it.
"""

from __future__ import annotations

import logging
import time
import zipfile
import zlib
from collections.abc import Iterator

from backend.convert.docx import convert_docx
from backend.convert.image import convert_image
from backend.convert.model import (
    SPREADSHEET_KINDS,
    ConversionFailed,
    Converted,
    ConvertLimits,
    Deadline,
    describe,
    safe_stem,
    table_file_names,
)
from backend.convert.pdf import convert_pdf
from backend.convert.sheets import convert_csv, convert_ods
from backend.convert.sniff import EXTENSION_KINDS, KIND_WORDS, TEXT_EXTENSIONS, extension, sniff_kind
from backend.convert.text import REPLACED_UTF8, NotText, convert_json, convert_plain, decode_text
from backend.convert.xlsx import convert_xlsx

log = logging.getLogger(__name__)


def convert(data: bytes, filename: str, *, limits: ConvertLimits | None = None) -> Converted:
    limits = limits or ConvertLimits.from_settings()
    started = time.monotonic()
    kind = "unknown"
    try:
        if not data:
            raise ConversionFailed("The file is empty.")
        if len(data) > limits.max_input_bytes:
            raise ConversionFailed(
                f"The file is {len(data) / 2**20:,.1f} MiB, over the {limits.max_input_bytes / 2**20:,.0f} MiB "
                "limit for conversion."
            )
        deadline = Deadline(limits.time_limit_seconds)
        kind = sniff_kind(data, filename)
        if extension(filename) == ".docx" and kind != "docx":
            raise ConversionFailed(not_a_word_document(kind))
        converted = _convert_kind(kind, data, filename, limits, deadline)
    except ConversionFailed as exc:
        converted = Converted(kind=getattr(exc, "kind", None) or kind, error=str(exc))
    except MemoryError:
        converted = Converted(
            kind=kind, error="The file needs too much memory to convert and was not staged."
        )
    except RecursionError:
        converted = Converted(kind=kind, error="The file is nested too deeply to convert and was not staged.")
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        what = KIND_WORDS.get(kind, "a file").split(" ", 1)[-1]
        converted = Converted(kind=kind, error=f"The {what} is damaged and cannot be read ({describe(exc)}).")
    except Exception as exc:  # the promise is "never raises"; a bug must not take the staging request down
        log.exception("conversion of %r failed unexpectedly", filename)
        converted = Converted(
            kind=kind, error=f"The file could not be converted ({type(exc).__name__}: {str(exc)[:120]})."
        )
    else:
        kind = converted.kind
        expected = EXTENSION_KINDS.get(extension(filename))
        if expected and expected != kind and not {expected, kind} <= set(TEXT_EXTENSIONS.values()):
            converted.warnings.insert(
                0,
                f"The file is named {extension(filename)} but its content is {KIND_WORDS[kind]}; "
                f"it was converted as {KIND_WORDS[kind]}.",
            )
        for table, name in zip(
            converted.tables, table_file_names(safe_stem(filename), converted.tables), strict=True
        ):
            table.name = name
    if converted.error is not None:
        converted.tables, converted.text, converted.keep_original = [], None, False
        if converted.kind == "text-like":
            converted.kind = "unknown"
    converted.elapsed_ms = round((time.monotonic() - started) * 1000)
    return converted


def not_a_word_document(kind: str) -> str:
    """A file named .docx whose content is something else: refused rather than read as that."""
    what = KIND_WORDS.get(kind, "text or an unknown format")
    return f"The file is named .docx but it is not a Word document (its content is {what}); it was not read."


def _convert_kind(
    kind: str, data: bytes, filename: str, limits: ConvertLimits, deadline: Deadline
) -> Converted:
    if kind == "xlsx":
        return convert_xlsx(data, limits, deadline)
    if kind == "ods":
        return convert_ods(data, limits, deadline)
    if kind == "pdf":
        return convert_pdf(data, limits, deadline)
    if kind == "docx":
        return convert_docx(data, limits, deadline)
    if kind == "image":
        return convert_image(data, limits, deadline)
    try:
        text, encoding = decode_text(data)
    except NotText as exc:
        raise ConversionFailed(
            f"This file is not a format Cleanroom can convert ({exc}). Supported: Excel (.xlsx), "
            "OpenDocument (.ods), Word (.docx), CSV, PDF, images, plain text, Markdown and JSON."
        ) from exc
    text_kind = _text_kind(text, filename)
    try:
        if text_kind == "csv":
            converted = convert_csv(text, limits, deadline, encoding)
        elif text_kind == "json":
            converted = convert_json(text, limits)
        else:
            converted = convert_plain(text, text_kind, limits, encoding)
    except ConversionFailed as exc:
        exc.kind = text_kind
        raise
    if encoding == REPLACED_UTF8:
        converted.warnings.append("Some bytes were not valid UTF-8 and were replaced with �.")
    return converted


def _text_kind(text: str, filename: str) -> str:
    by_name = TEXT_EXTENSIONS.get(extension(filename))
    if by_name:
        return by_name
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            convert_json(text, ConvertLimits())
            return "json"
        except ConversionFailed:
            pass
    return "text"


# --- what the injection scanner reads --------------------------------------------------------------------


def cells_for_scan(converted: Converted) -> Iterator[tuple[str | None, list[str], list[list[str]]]]:
    """(sheet, header, rows) for every table cell the bundle holds, formula text included.

    A sheet with formulas is yielded a second time as "<sheet> (formulas)": the same shape, each cell the
    formula text or "", so a finding's row and column point at the real cell. PDF tables are not yielded:
    their characters are already in `text_for_scan`, whose lines match the bundled .txt.
    """
    if converted.error is not None or converted.kind not in SPREADSHEET_KINDS:
        return
    for table in converted.tables:
        yield table.sheet, table.header, table.rows
        if table.has_formulas:
            header = [f or h for f, h in zip(table.formula_header, table.header, strict=False)]
            yield f"{table.sheet or 'CSV'} (formulas)", header, table.formulas


def text_for_scan(converted: Converted) -> str | None:
    """Text to scan line by line. For text, PDF and image files it is exactly the bundled .txt/.md/.json, so
    line numbers match; for spreadsheets it lists cell comments and document properties (sheet names travel
    with `cells_for_scan`, one table per sheet, empty sheets included)."""
    if converted.error is not None:
        return None
    if converted.kind in SPREADSHEET_KINDS:
        return "\n".join(converted.extra_scan_text) + "\n" if converted.extra_scan_text else None
    return converted.text
