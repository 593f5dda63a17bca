"""PDF to text per page (pdfplumber) plus its tables; pages without a text layer are OCRed when possible."""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from pathlib import Path

from backend.convert.image import TesseractMissing, ocr_png_file
from backend.convert.model import (
    ConversionFailed,
    Converted,
    ConvertLimits,
    Deadline,
    Table,
    cell_text,
    describe,
)


def convert_pdf(data: bytes, limits: ConvertLimits, deadline: Deadline) -> Converted:
    _refuse_password_protected(data)
    import pdfplumber

    converted = Converted(kind="pdf")
    try:
        with pdfplumber.open(io.BytesIO(data)) as pdf:
            _read_pages(pdf, data, limits, deadline, converted)
    except ConversionFailed:
        raise
    except Exception as exc:  # pdfminer raises a wide variety on damaged files
        raise _failure(exc) from exc
    return converted


def _read_pages(pdf, data: bytes, limits: ConvertLimits, deadline: Deadline, converted: Converted) -> None:
    page_count = len(pdf.pages)
    converted.pages = page_count
    if page_count > limits.max_pdf_pages:
        converted.text_truncated = True
        converted.warnings.append(
            f"Only the first {limits.max_pdf_pages:,} of {page_count:,} pages were converted."
        )
    cells_left = limits.max_cells
    ocr_left = limits.max_ocr_pages
    parts: list[str] = []
    not_ocred: list[int] = []
    last = min(page_count, limits.max_pdf_pages)
    for number in range(1, last + 1):
        if number == 1:
            deadline.check()
        elif deadline.remaining() <= 0:
            # Long documents keep what was read in time, clearly marked, rather than nothing at all.
            converted.text_truncated = True
            converted.warnings.append(
                f"Only the first {number - 1:,} of {page_count:,} pages were converted within the "
                f"{deadline.seconds:g} s time limit."
            )
            break
        page = pdf.pages[number - 1]
        try:
            text = page.extract_text() or ""
            raw_tables = page.extract_tables()
        except Exception as exc:
            converted.warnings.append(f"Page {number} could not be read ({describe(exc)}); it is left empty.")
            text, raw_tables = "", []
        finally:
            _close(page)
        if not text.strip():
            if ocr_left > 0:
                ocr_left -= 1
                text = _ocr_page(data, number, deadline, converted)
            else:
                not_ocred.append(number)
        parts.append(f"--- page {number} ---\n{text.rstrip()}\n")
        for k, raw in enumerate(raw_tables, start=1):
            table = _table(raw, f"page {number} table {k}")
            if table is None or cells_left <= 0:
                continue
            size = (len(table.rows) + 1) * max(len(table.header), 1)
            if size > cells_left:
                converted.warnings.append(f"Tables from page {number} on were not extracted (cell limit).")
                cells_left = 0
                continue
            cells_left -= size
            converted.tables.append(table)
    if not_ocred:
        converted.warnings.append(
            f"{len(not_ocred)} page(s) have no text layer and were not OCRed (limit {limits.max_ocr_pages} "
            f"OCR pages): {', '.join(map(str, not_ocred[:20]))}."
        )
    converted.text = "".join(parts)


def _refuse_password_protected(data: bytes) -> None:
    from pypdf import PasswordType, PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if not reader.is_encrypted:
            return
        if reader.decrypt("") != PasswordType.NOT_DECRYPTED:
            return  # only an owner password (print/copy restrictions): readable
    except Exception:
        return  # pdfplumber gets its own chance and reports damage itself
    raise ConversionFailed("The PDF is password-protected; remove the password and upload it again.")


def _failure(exc: BaseException) -> ConversionFailed:
    if "password" in type(exc).__name__.lower():
        return ConversionFailed("The PDF is password-protected; remove the password and upload it again.")
    return ConversionFailed(f"The PDF is damaged and cannot be read ({describe(exc)}).")


def _table(raw: list[list[str | None]], sheet: str) -> Table | None:
    rows = [[cell_text(c).strip() for c in row] for row in raw if row and any(c for c in row)]
    if len(rows) < 2:
        return None
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    return Table("", sheet, False, rows[0], rows[1:], False, len(rows) - 1)


def _ocr_page(data: bytes, number: int, deadline: Deadline, converted: Converted) -> str:
    if shutil.which("pdftoppm") is None:
        converted.warnings.append(
            f"Page {number} has no text layer and pdftoppm is missing, so it was not OCRed."
        )
        return ""
    with tempfile.TemporaryDirectory(prefix="cleanroom-pdf-") as tmp:
        source = Path(tmp, "in.pdf")
        source.write_bytes(data)
        try:
            subprocess.run(
                [
                    "pdftoppm",
                    "-r",
                    "200",
                    "-gray",
                    "-png",
                    "-f",
                    str(number),
                    "-l",
                    str(number),
                    "-singlefile",
                    str(source),
                    str(Path(tmp, "page")),
                ],
                capture_output=True,
                timeout=max(1.0, deadline.remaining()),
                check=True,
            )
            text = ocr_png_file(Path(tmp, "page.png"), deadline)
        except subprocess.TimeoutExpired:
            converted.warnings.append(f"Page {number} could not be OCRed within the time limit.")
            return ""
        except (subprocess.CalledProcessError, OSError, TesseractMissing) as exc:
            converted.warnings.append(
                f"Page {number} has no text layer and could not be OCRed ({describe(exc)})."
            )
            return ""
    converted.warnings.append(
        f"Page {number} has no text layer; its text comes from OCR and may contain errors."
    )
    return text


def _close(page) -> None:
    close = getattr(page, "close", None)
    if close is not None:
        close()
