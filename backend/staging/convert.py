"""Drive files to text on the way into a run: the one entry point is `convert(data, filename)`.

The type comes from the content (magic bytes, zip members); the file name only breaks ties among text
types (.md, .json, .csv vs .txt). Bad input never raises: it comes back as `Converted(error=...)` with a
sentence a person can act on. Work is bounded by `ConvertLimits` (bytes, rows, cells, zip expansion,
pages, pixels, wall time). `convert_isolated` runs the same conversion in a child process with a hard
wall-clock and memory ceiling; staging untrusted uploads should prefer it.
"""

from __future__ import annotations

import logging
import time
import zipfile
import zlib
from collections.abc import Iterator
from io import BytesIO

from backend.staging.convert_image import convert_image
from backend.staging.convert_model import (
    KINDS,
    SPREADSHEET_KINDS,
    ConversionFailed,
    Converted,
    ConvertLimits,
    Deadline,
    Table,
    describe,
    safe_stem,
    table_file_names,
)
from backend.staging.convert_pdf import convert_pdf
from backend.staging.convert_sheets import convert_csv, convert_ods
from backend.staging.convert_text import REPLACED_UTF8, NotText, convert_json, convert_plain, decode_text
from backend.staging.convert_worker import convert_isolated
from backend.staging.convert_xlsx import convert_xlsx

__all__ = [
    "KINDS",
    "ConvertLimits",
    "Converted",
    "Table",
    "cells_for_scan",
    "convert",
    "convert_isolated",
    "sniff_kind",
    "text_for_scan",
]

log = logging.getLogger(__name__)

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ODS_MIMETYPE = b"application/vnd.oasis.opendocument.spreadsheet"
IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
)
TEXT_EXTENSIONS = {
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "text",
    ".text": "text",
    ".log": "text",
}
EXTENSION_KINDS = {
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".ods": "ods",
    ".pdf": "pdf",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".tif": "image",
    ".tiff": "image",
    ".bmp": "image",
    ".webp": "image",
    **TEXT_EXTENSIONS,
}
KIND_WORDS = {
    "xlsx": "an Excel workbook",
    "ods": "an OpenDocument spreadsheet",
    "csv": "CSV text",
    "pdf": "a PDF",
    "image": "an image",
    "text": "plain text",
    "markdown": "Markdown text",
    "json": "JSON",
}


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
        expected = EXTENSION_KINDS.get(_extension(filename))
        if expected and expected != kind and not {expected, kind} <= set(TEXT_EXTENSIONS.values()):
            converted.warnings.insert(
                0,
                f"The file is named {_extension(filename)} but its content is {KIND_WORDS[kind]}; "
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


def sniff_kind(data: bytes, filename: str) -> str:
    """The kind from the bytes; raises ConversionFailed for content we recognise but do not convert."""
    head = data[:2048]
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_kind(data, filename)
    if head.startswith(OLE_MAGIC):
        raise ConversionFailed(_ole_refusal(data))
    if head.lstrip()[:5] == b"%PDF-" or (b"%PDF-" in head[:1024] and _extension(filename) == ".pdf"):
        return "pdf"  # readers accept junk before the header; a text file that mentions %PDF- is not a PDF
    for magic, _ in IMAGE_MAGIC:
        if head.startswith(magic):
            return "image"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image"
    if _is_bmp(head):
        return "image"
    return "text-like"


def _convert_kind(
    kind: str, data: bytes, filename: str, limits: ConvertLimits, deadline: Deadline
) -> Converted:
    if kind == "xlsx":
        return convert_xlsx(data, limits, deadline)
    if kind == "ods":
        return convert_ods(data, limits, deadline)
    if kind == "pdf":
        return convert_pdf(data, limits, deadline)
    if kind == "image":
        return convert_image(data, limits, deadline)
    try:
        text, encoding = decode_text(data)
    except NotText as exc:
        raise ConversionFailed(
            f"This file is not a format Cleanroom can convert ({exc}). Supported: Excel (.xlsx), "
            "OpenDocument (.ods), CSV, PDF, images, plain text, Markdown and JSON."
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
    by_name = TEXT_EXTENSIONS.get(_extension(filename))
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


def _zip_kind(data: bytes, filename: str) -> str:
    try:
        archive = zipfile.ZipFile(BytesIO(data))
        names = set(archive.namelist())
        mimetype = archive.read("mimetype")[:200].strip() if "mimetype" in names else b""
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, KeyError) as exc:
        what = KIND_WORDS.get(EXTENSION_KINDS.get(_extension(filename), ""), "")
        what = what if what in (KIND_WORDS["xlsx"], KIND_WORDS["ods"]) else "a zip-based document"
        raise ConversionFailed(
            f"The file looks like {what} but is damaged or incomplete (was the upload cut short?)."
        ) from exc
    if "xl/workbook.xml" in names:
        return "xlsx"
    if mimetype == ODS_MIMETYPE or (
        not mimetype and "content.xml" in names and _extension(filename) == ".ods"
    ):
        return "ods"
    if "xl/workbook.bin" in names:
        raise ConversionFailed(
            "Excel binary workbooks (.xlsb) are not supported; save it as .xlsx and upload again."
        )
    if "word/document.xml" in names or mimetype.startswith(b"application/vnd.oasis.opendocument.text"):
        raise ConversionFailed(
            "Word-processor documents are not supported yet; save it as PDF and upload again."
        )
    if "ppt/presentation.xml" in names or mimetype.startswith(
        b"application/vnd.oasis.opendocument.presentation"
    ):
        raise ConversionFailed("Presentations are not supported yet; save it as PDF and upload again.")
    if "[Content_Types].xml" in names:
        raise ConversionFailed("This Office file is damaged: it has no workbook inside.")
    raise ConversionFailed("Zip archives are not supported; upload the files inside it one by one.")


def _ole_refusal(data: bytes) -> str:
    if "EncryptedPackage".encode("utf-16-le") in data or "EncryptionInfo".encode("utf-16-le") in data:
        return "The file is password-protected (an encrypted Office file); remove the password and upload it again."
    if "Workbook".encode("utf-16-le") in data or "Book".encode("utf-16-le") in data:
        return "Old Excel 97–2003 workbooks (.xls) are not supported; save it as .xlsx and upload again."
    if "WordDocument".encode("utf-16-le") in data:
        return "Old Word documents (.doc) are not supported; save it as PDF and upload again."
    return "Old Microsoft Office files (97–2003 format) are not supported; save it in a current format."


def _is_bmp(head: bytes) -> bool:
    # "BM" alone is too weak: plenty of text starts with it.
    return (
        len(head) >= 18
        and head[:2] == b"BM"
        and head[6:10] == b"\x00\x00\x00\x00"
        and int.from_bytes(head[14:18], "little") in (12, 40, 52, 56, 64, 108, 124)
    )


def _extension(filename: str) -> str:
    name = filename.rsplit("/", 1)[-1].lower()
    return "." + name.rsplit(".", 1)[1] if "." in name.strip(".") else ""


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
