"""Spreadsheets to tables: the sheet builder and zip guard shared with XLSX, plus ODS (content.xml, streamed) and CSV."""

from __future__ import annotations

import csv
import io
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from typing import Any
from xml.etree import ElementTree as ET
from xml.parsers import expat

from backend.convert.model import (
    DAMAGED_PART_ERRORS,
    MAX_COLUMNS,
    ConversionFailed,
    Converted,
    ConvertLimits,
    Deadline,
    Table,
    cell_text,
    describe,
)

CHECK_EVERY = 256


class CellBudget:
    """Cells stored over all sheets of one file; once spent, further rows are counted but not kept."""

    def __init__(self, max_cells: int) -> None:
        self.left = max_cells
        self.exhausted = False

    def take(self, n: int) -> bool:
        if n > self.left:
            self.exhausted = True
            return False
        self.left -= n
        return True


class SheetBuilder:
    """Collects one sheet's rows by their 0-based sheet row index and builds a `Table`.

    The header is the first non-empty row; empty rows inside the data are kept (as empty CSV rows) so row
    numbers stay faithful, trailing empty rows are dropped. Rows past the row limit or the cell budget are
    counted, not stored.
    """

    def __init__(self, limits: ConvertLimits, budget: CellBudget) -> None:
        self.limits = limits
        self.budget = budget
        self.rows: dict[int, list[str]] = {}
        self.formulas: dict[int, dict[int, str]] = {}
        self.first_row: int | None = None
        self.last_row = -1
        self.width = 0
        self.truncated = False

    def _room_for(self, index: int, cells: int) -> bool:
        if self.truncated:
            return False
        if self.first_row is not None and index - self.first_row > self.limits.max_rows_per_sheet:
            self.truncated = True
            return False
        if not self.budget.take(cells):
            self.truncated = True
            return False
        return True

    def add_row(self, index: int, values: list[str]) -> None:
        while values and values[-1] == "":
            values.pop()
        if not values:
            return
        if len(values) > MAX_COLUMNS:
            values = values[:MAX_COLUMNS]
        if self.first_row is None:
            self.first_row = index
        self.last_row = max(self.last_row, index)
        if self._room_for(index, len(values)):
            self.rows[index] = values
            self.width = max(self.width, len(values))

    def add_cells(self, index: int, cells: dict[int, str]) -> None:
        """A sparse row (column -> text, non-empty cells only): no 16,384-wide lists for far-out cells."""
        if not cells:
            return
        width = min(max(cells) + 1, MAX_COLUMNS)
        if self.first_row is None:
            self.first_row = index
        self.last_row = max(self.last_row, index)
        if self._room_for(index, width):
            values = [""] * width
            for column, text in cells.items():
                if column < width:
                    values[column] = text
            self.rows[index] = values
            self.width = max(self.width, width)

    def add_formula(self, index: int, column: int, formula: str) -> None:
        if column >= MAX_COLUMNS:
            return
        if self.first_row is None or index < self.first_row:
            self.first_row = index if self.first_row is None else min(self.first_row, index)
        self.last_row = max(self.last_row, index)
        if self.first_row is not None and index - self.first_row > self.limits.max_rows_per_sheet:
            self.truncated = True
            return
        if not self.budget.take(1):
            self.truncated = True
            return
        self.formulas.setdefault(index, {})[column] = cell_text(formula)
        self.width = max(self.width, column + 1)

    def build(self, sheet: str | None, hidden: bool) -> Table:
        if self.first_row is None:
            return Table("", sheet, hidden, [], [], False, 0)
        first = self.first_row
        last = min(self.last_row, first + self.limits.max_rows_per_sheet)
        if self.truncated:
            stored = [i for i in (*self.rows, *self.formulas) if i <= last]
            last = max(stored, default=first)
        width = self.width

        def padded(values: list[str]) -> list[str]:
            return values + [""] * (width - len(values))

        def formula_row(index: int) -> list[str]:
            cells = self.formulas.get(index, {})
            return [cells.get(c, "") for c in range(width)]

        header = padded(self.rows.get(first, []))
        rows = [padded(self.rows.get(i, [])) for i in range(first + 1, last + 1)]
        formula_header: list[str] = []
        formulas: list[list[str]] = []
        if self.formulas:
            formula_header = formula_row(first)
            formulas = [formula_row(i) for i in range(first + 1, last + 1)]
        return Table(
            name="",
            sheet=sheet,
            hidden=hidden,
            header=header,
            rows=rows,
            truncated=self.truncated,
            total_rows=self.last_row - first,
            formula_header=formula_header,
            formulas=formulas,
        )


def finish_sheets(
    converted: Converted, builders: list[tuple[str, bool, SheetBuilder]], limits: ConvertLimits
) -> None:
    for sheet, hidden, builder in builders:
        table = builder.build(sheet, hidden)
        converted.tables.append(table)
        if table.truncated:
            converted.warnings.append(
                f"Sheet {sheet!r} was cut to {len(table.rows):,} of {table.total_rows:,} rows "
                f"(limits: {limits.max_rows_per_sheet:,} rows per sheet, {limits.max_cells:,} cells per file)."
            )
        if hidden:
            converted.warnings.append(
                f"Sheet {sheet!r} is hidden in the workbook; it is staged and marked hidden."
            )


# --- zip containers ------------------------------------------------------------------------------------


def open_zip_checked(data: bytes | Any, limits: ConvertLimits, what: str) -> zipfile.ZipFile:
    """Open an xlsx/ods/docx container and refuse decompression bombs before any parser touches it.
    `data`: bytes, or a seekable file (Drive checks an uploaded .docx here, mapped, before keeping it).

    Python's zipfile never inflates a member past its declared size (a lying header fails the CRC check),
    so the declared sizes are a trustworthy upper bound.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes | bytearray) else data)
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise ConversionFailed(f"The {what} is damaged and cannot be opened ({exc}).") from exc
    if len(members) > limits.max_zip_members:
        raise ConversionFailed(
            f"The {what} has {len(members):,} parts inside; that is too many to convert safely."
        )
    total = sum(m.file_size for m in members)
    if total > limits.max_unzipped_bytes:
        raise ConversionFailed(
            f"The {what} would unpack to {total / 2**20:,.0f} MiB, over the "
            f"{limits.max_unzipped_bytes / 2**20:,.0f} MiB limit; it looks like a decompression bomb."
        )
    for m in members:
        if m.file_size > limits.zip_ratio_floor_bytes and m.file_size > limits.max_zip_ratio * max(
            m.compress_size, 1
        ):
            raise ConversionFailed(
                f"The {what} contains a part ({m.filename}) that expands {m.file_size // max(m.compress_size, 1):,} "
                "times; it looks like a decompression bomb and was not opened."
            )
        if m.flag_bits & 0x1:
            raise ConversionFailed(
                f"The {what} is password-protected (encrypted zip); remove the password first."
            )
    return archive


# --- ODS -----------------------------------------------------------------------------------------------

NS_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
NS_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
NS_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
NS_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"


def _q(ns: str, tag: str) -> str:
    return f"{{{ns}}}{tag}"


T_TABLE = _q(NS_TABLE, "table")
T_ROW = _q(NS_TABLE, "table-row")
T_CELL = _q(NS_TABLE, "table-cell")
T_COVERED = _q(NS_TABLE, "covered-table-cell")
T_P = _q(NS_TEXT, "p")
T_H = _q(NS_TEXT, "h")
T_S = _q(NS_TEXT, "s")
T_TAB = _q(NS_TEXT, "tab")
T_BR = _q(NS_TEXT, "line-break")
T_ANNOTATION = _q(NS_OFFICE, "annotation")
T_STYLE = _q(NS_STYLE, "style")
T_TABLE_PROPS = _q(NS_STYLE, "table-properties")
A_NAME = _q(NS_TABLE, "name")
A_STYLE_NAME = _q(NS_TABLE, "style-name")
A_ROWS_REPEATED = _q(NS_TABLE, "number-rows-repeated")
A_COLS_REPEATED = _q(NS_TABLE, "number-columns-repeated")
A_FORMULA = _q(NS_TABLE, "formula")
A_DISPLAY = _q(NS_TABLE, "display")
A_VALUE_TYPE = _q(NS_OFFICE, "value-type")
A_VALUE = _q(NS_OFFICE, "value")
A_DATE = _q(NS_OFFICE, "date-value")
A_TIME = _q(NS_OFFICE, "time-value")
A_BOOL = _q(NS_OFFICE, "boolean-value")
A_STYLE_FAMILY = _q(NS_STYLE, "family")
A_STYLE_NAME_S = _q(NS_STYLE, "name")


def convert_ods(data: bytes, limits: ConvertLimits, deadline: Deadline) -> Converted:
    archive = open_zip_checked(data, limits, "OpenDocument spreadsheet")
    if "content.xml" not in archive.namelist():
        raise ConversionFailed("The OpenDocument spreadsheet is damaged: it has no content.xml.")
    if _ods_encrypted(archive):
        raise ConversionFailed(
            "The OpenDocument spreadsheet is password-protected; remove the password and upload it again."
        )
    converted = Converted(kind="ods", keep_original=True)
    budget = CellBudget(limits.max_cells)
    try:
        with archive.open("content.xml") as prolog:
            _refuse_doctype(prolog, deadline)
        with archive.open("content.xml") as stream:
            builders = list(_parse_ods(stream, limits, budget, deadline, converted.extra_scan_text))
    except ConversionFailed:
        raise
    except (ET.ParseError, *DAMAGED_PART_ERRORS) as exc:
        raise ConversionFailed(
            f"The OpenDocument spreadsheet is damaged and cannot be read ({describe(exc)})."
        ) from exc
    finish_sheets(converted, builders, limits)
    if budget.exhausted:
        converted.warnings.append(
            f"The spreadsheet has more than {limits.max_cells:,} cells; the rest was cut."
        )
    return converted


class _PrologEnd(Exception):
    """The root element started: a DOCTYPE can no longer come."""


def _refuse_doctype(stream, deadline: Deadline) -> None:
    """Refuse a DOCTYPE wherever the prolog puts it: after any amount of comments or whitespace, and in
    whatever encoding the document declares. expat itself reports the declaration, so no byte pattern can
    be dodged; the read stops at the root element, after which a DOCTYPE is not well-formed anyway."""
    parser = expat.ParserCreate()

    def doctype(*_args) -> None:
        raise ConversionFailed("The OpenDocument spreadsheet declares a DOCTYPE, which is not allowed.")

    def root(*_args) -> None:
        raise _PrologEnd

    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = doctype
    parser.StartElementHandler = root
    try:
        while chunk := stream.read(64 * 1024):
            deadline.check()
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except _PrologEnd:
        return


def _ods_encrypted(archive: zipfile.ZipFile) -> bool:
    try:
        info = archive.getinfo("META-INF/manifest.xml")
    except KeyError:
        return False
    if info.file_size > 4 * 1024 * 1024:
        return False
    try:
        return b"encryption-data" in archive.read(info)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError):
        return False


def _parse_ods(
    stream,
    limits: ConvertLimits,
    budget: CellBudget,
    deadline: Deadline,
    comments: list[str],
    make_builder=None,
):
    """Yields (sheet, hidden, builder) per sheet; `make_builder(limits, budget)` (default `SheetBuilder`) lets
    the import's row stream (backend/convert/rows.py) emit rows as they are read instead of keeping them."""
    make_builder = make_builder or SheetBuilder
    hidden_styles: set[str] = set()
    stack: list[ET.Element] = []
    sheet_name = ""
    sheet_count = 0
    sheet_hidden = False
    builder: SheetBuilder | None = None
    row_index = 0
    processed = 0
    for event, elem in ET.iterparse(stream, events=("start", "end")):
        if event == "start":
            stack.append(elem)
            if elem.tag == T_TABLE:
                sheet_count += 1
                sheet_name = elem.get(A_NAME) or f"Sheet{sheet_count}"
                sheet_hidden = elem.get(A_STYLE_NAME, "") in hidden_styles
                builder = make_builder(limits, budget)
                row_index = 0
            continue
        stack.pop()
        if elem.tag == T_TABLE_PROPS and elem.get(A_DISPLAY) == "false":
            parent = stack[-1] if stack else None
            if parent is not None and parent.tag == T_STYLE:
                hidden_styles.add(parent.get(A_STYLE_NAME_S, ""))
        elif elem.tag == T_ROW and builder is not None:
            processed += 1
            if processed % CHECK_EVERY == 0:
                deadline.check()
            repeat = _int_attr(elem, A_ROWS_REPEATED)
            values, formulas, notes = _ods_row(elem)
            for column, note in notes:
                comments.append(f"cell comment {sheet_name}!{column_letter(column)}{row_index + 1}: {note}")
            if any(values) or formulas:
                for _ in range(min(repeat, limits.max_rows_per_sheet + 2)):
                    builder.add_row(row_index, list(values))
                    for column, formula in formulas.items():
                        builder.add_formula(row_index, column, formula)
                    row_index += 1
                if repeat > limits.max_rows_per_sheet + 2:
                    row_index += repeat - (limits.max_rows_per_sheet + 2)
                    builder.last_row = row_index - 1
                    builder.truncated = True
            else:
                row_index += repeat
            if stack:
                stack[-1].remove(elem)
        elif elem.tag == T_TABLE and builder is not None:
            yield sheet_name, sheet_hidden, builder
            builder = None
            if stack:
                stack[-1].remove(elem)


def _ods_row(row: ET.Element) -> tuple[list[str], dict[int, str], list[tuple[int, str]]]:
    values: list[str] = []
    formulas: dict[int, str] = {}
    notes: list[tuple[int, str]] = []
    pending_empty = 0
    for cell in row:
        if cell.tag not in (T_CELL, T_COVERED):
            continue
        for annotation in cell.iter(T_ANNOTATION):
            note = " ".join(_ods_text(p) for p in annotation.iter(T_P))
            if note.strip():
                notes.append((len(values) + pending_empty, " ".join(note.split())))
        repeat = _int_attr(cell, A_COLS_REPEATED)
        text = _ods_cell_value(cell)
        formula = cell.get(A_FORMULA)
        if not text and not formula:
            pending_empty += repeat
            continue
        if len(values) + pending_empty >= MAX_COLUMNS:
            break
        values.extend([""] * pending_empty)
        pending_empty = 0
        for _ in range(min(repeat, MAX_COLUMNS - len(values))):
            if formula:
                formulas[len(values)] = _ods_formula(formula)
            values.append(text)
    return values, formulas, notes


def _ods_cell_value(cell: ET.Element) -> str:
    kind = cell.get(A_VALUE_TYPE)
    if kind in ("float", "percentage", "currency") and cell.get(A_VALUE) is not None:
        raw = cell.get(A_VALUE, "")
        try:
            return cell_text(float(raw))
        except ValueError:
            return raw
    if kind == "date" and cell.get(A_DATE):
        value = cell.get(A_DATE, "")
        return value[:10] if value.endswith("T00:00:00") else value
    if kind == "time" and cell.get(A_TIME):
        return cell.get(A_TIME, "")
    if kind == "boolean" and cell.get(A_BOOL):
        return "TRUE" if cell.get(A_BOOL) == "true" else "FALSE"
    paragraphs = [_ods_text(p) for p in cell if p.tag in (T_P, T_H)]
    return cell_text("\n".join(paragraphs))


def _ods_text(elem: ET.Element) -> str:
    parts = [elem.text or ""]
    for child in elem:
        if child.tag == T_S:
            parts.append(" " * _int_attr(child, _q(NS_TEXT, "c")))
        elif child.tag == T_TAB:
            parts.append("\t")
        elif child.tag == T_BR:
            parts.append("\n")
        else:
            parts.append(_ods_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _ods_formula(formula: str) -> str:
    # "of:=SUM([.A1:.A3])" -> "=SUM([.A1:.A3])"; the namespace prefix means nothing to a reader.
    prefix, sep, rest = formula.partition(":=")
    if sep and prefix.isalnum() and len(prefix) <= 8:
        return "=" + rest
    return formula


def column_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _int_attr(elem: ET.Element, name: str) -> int:
    try:
        return max(1, int(elem.get(name, "1")))
    except ValueError:
        return 1


# --- CSV -----------------------------------------------------------------------------------------------

DELIMITERS = ",;\t|"


def sniff_delimiter(text: str) -> str:
    sample = text[:65536]
    if len(text) > len(sample) and "\n" in sample:
        sample = sample[: sample.rfind("\n")]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=DELIMITERS)
        if dialect.delimiter in DELIMITERS:
            return dialect.delimiter
    except csv.Error:
        pass
    return _most_consistent_delimiter(sample.splitlines()[:50])


def _most_consistent_delimiter(lines: list[str]) -> str:
    best, best_score = ",", (0, 0)
    for delimiter in DELIMITERS:
        counts = [line.count(delimiter) for line in lines if line.strip()]
        if not counts or max(counts) == 0:
            continue
        typical = max(set(counts), key=counts.count)
        score = (counts.count(typical) if typical else 0, typical)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def convert_csv(text: str, limits: ConvertLimits, deadline: Deadline, encoding: str) -> Converted:
    delimiter = sniff_delimiter(text)
    converted = Converted(kind="csv", keep_original=True)
    budget = CellBudget(limits.max_cells)
    builder = SheetBuilder(limits, budget)
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
        for index, row in enumerate(_rows(reader, deadline)):
            builder.add_row(index, [cell_text(v) for v in row])
    except csv.Error as exc:
        raise ConversionFailed(f"The CSV file cannot be parsed ({describe(exc)}).") from exc
    table = builder.build(None, False)
    converted.tables.append(table)
    converted.details = {"encoding": encoding, "delimiter": delimiter}
    if table.truncated:
        converted.warnings.append(
            f"The CSV file was cut to {len(table.rows):,} of {table.total_rows:,} rows "
            f"(limit {limits.max_rows_per_sheet:,} rows, {limits.max_cells:,} cells)."
        )
    return converted


def _rows(reader: Iterable[list[str]], deadline: Deadline) -> Iterator[list[str]]:
    for index, row in enumerate(reader):
        if index % CHECK_EVERY == 0:
            deadline.check()
        yield row
