"""PDF to text per page (pdfplumber) plus its tables; pages without a text layer are rendered (pdfium, in this
process) and OCRed (tesseract) when possible."""

from __future__ import annotations

import io
import math
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
    pages = _PageImages(data, limits)
    try:
        with pdfplumber.open(io.BytesIO(data)) as pdf:
            _read_pages(pdf, pages, limits, deadline, converted)
    except ConversionFailed:
        raise
    except Exception as exc:  # pdfminer raises a wide variety on damaged files
        raise _failure(exc) from exc
    finally:
        pages.close()
    return converted


def _read_pages(
    pdf, pages: _PageImages, limits: ConvertLimits, deadline: Deadline, converted: Converted
) -> None:
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
                text = _ocr_page(pages, number, deadline, converted)
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


# Pages without a text layer are rendered at this resolution for OCR (what pdftoppm -r 200 gave before), in
# this process with pdfium (pypdfium2, which pdfplumber brings), not by a program started per page.
OCR_DPI = 200


class _PageImages:
    """The PDF opened once in pdfium, for the pages that need OCR. In the converter child it renders under the
    child's own ceilings: RLIMIT_AS (a bitmap pdfium cannot allocate is an error, not a crash), RLIMIT_CPU and
    the parent's wall-clock kill, and the seccomp filter; a page is rendered with at most
    `limits.max_image_pixels` pixels, so a huge page costs no more memory than the largest image accepted."""

    def __init__(self, data: bytes, limits: ConvertLimits) -> None:
        self._data = data
        self._limits = limits
        self._document = None

    def render(self, number: int, target: Path) -> bool:
        """Page `number` (1-based) as a grayscale PNG at `target`; True when it was scaled down to fit the pixel
        limit. Raises pypdfium2.PdfiumError (or MemoryError) when pdfium cannot render it."""
        import pypdfium2

        if self._document is None:
            self._document = pypdfium2.PdfDocument(self._data)
        page = self._document[number - 1]
        try:
            width, height = page.get_size()  # points, 1/72 inch
            scale = OCR_DPI / 72
            area = max(width * height, 1.0)
            reduced = area * scale * scale > self._limits.max_image_pixels
            if reduced:
                scale = (self._limits.max_image_pixels / area) ** 0.5
                # pdfium rounds each side up to whole pixels
                while math.ceil(width * scale) * math.ceil(height * scale) > self._limits.max_image_pixels:
                    scale *= 0.99
            bitmap = page.render(scale=scale, grayscale=True)
            try:
                bitmap.to_pil().save(target, format="PNG")  # the image shares the bitmap's buffer
            finally:
                bitmap.close()
            return reduced
        finally:
            page.close()

    def close(self) -> None:
        if self._document is not None:
            self._document.close()
            self._document = None


def _ocr_page(pages: _PageImages, number: int, deadline: Deadline, converted: Converted) -> str:
    import pypdfium2

    with tempfile.TemporaryDirectory(prefix="cleanroom-pdf-") as tmp:
        target = Path(tmp, "page.png")
        try:
            reduced = pages.render(number, target)
            text = ocr_png_file(target, deadline)
        except subprocess.TimeoutExpired:
            converted.warnings.append(f"Page {number} could not be OCRed within the time limit.")
            return ""
        except (
            pypdfium2.PdfiumError,
            MemoryError,
            subprocess.CalledProcessError,
            OSError,
            ValueError,
            TesseractMissing,
        ) as exc:
            converted.warnings.append(
                f"Page {number} has no text layer and could not be OCRed ({describe(exc)})."
            )
            return ""
    if reduced:
        converted.warnings.append(
            f"Page {number} is very large; it was OCRed at a lower resolution than {OCR_DPI} dpi."
        )
    converted.warnings.append(
        f"Page {number} has no text layer; its text comes from OCR and may contain errors."
    )
    return text


def _close(page) -> None:
    close = getattr(page, "close", None)
    if close is not None:
        close()
