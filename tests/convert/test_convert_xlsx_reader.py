"""The streaming XLSX reader reads every cell the way openpyxl (the reference) does."""

from __future__ import annotations

import datetime as dt
import io
import zipfile

import openpyxl
import pytest
from openpyxl.cell.rich_text import CellRichText, TextBlock
from openpyxl.cell.text import InlineFont

from backend.convert import convert
from backend.convert.model import cell_text
from backend.demo.files import Formula, Sheet, demo_drive_files, write_xlsx


def reference_grid(data: bytes, title: str, *, formulas: bool = False) -> list[list[str]]:
    """What openpyxl sees, trimmed the way conversion trims (first to last non-empty row, right-padded)."""
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=not formulas)
    ws = wb[title]
    ws.reset_dimensions()
    rows = []
    for row in ws.iter_rows(values_only=True):
        if formulas:
            values = [
                v if isinstance(v, str) and v.startswith("=") else getattr(v, "text", None) for v in row
            ]
            rows.append([cell_text(v) for v in values])
        else:
            rows.append([cell_text(v) for v in row])
    wb.close()
    return rows


def trimmed(rows: list[list[str]], start: int, stop: int, width: int) -> list[list[str]]:
    out = []
    for row in rows[start:stop]:
        row = list(row[:width])
        out.append(row + [""] * (width - len(row)))
    return out


def assert_same_as_openpyxl(data: bytes) -> None:
    converted = convert(data, "book.xlsx")
    assert converted.error is None, converted.error
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True)
    titles = [ws.title for ws in wb.worksheets]
    states = {ws.title: ws.sheet_state for ws in wb.worksheets}
    wb.close()
    assert [t.sheet for t in converted.tables] == titles
    for table in converted.tables:
        assert table.hidden == (states[table.sheet] != "visible")
        grid = [table.header, *table.rows]
        if not table.header:
            assert all(not any(r) for r in reference_grid(data, table.sheet))
            continue
        width = len(table.header)
        reference = reference_grid(data, table.sheet)
        first = next(i for i, r in enumerate(reference) if any(r))
        assert grid == trimmed(reference, first, first + len(grid), width), table.sheet
        assert not any(any(r) for r in reference[first + len(grid) :])  # nothing lost after the end
        if table.has_formulas:
            ref_formulas = trimmed(
                reference_grid(data, table.sheet, formulas=True), first, first + len(grid), width
            )
            assert [table.formula_header, *table.formulas] == ref_formulas, table.sheet


def saved(wb: openpyxl.Workbook) -> bytes:
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def test_values_of_every_type_match_openpyxl():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Types"
    ws.append(["text", "int", "float", "bool", "date", "datetime", "time", "percent", "error", "formula"])
    ws.append(["plain", 42, 3.25, True, dt.date(2024, 9, 14), dt.datetime(2024, 9, 14, 13, 5, 7),
               dt.time(8, 30), 0.125, "#N/A", "=B2*2"])  # fmt: skip
    ws.append(["  padded  ", -7, 1e-9, False, dt.date(1900, 1, 1), dt.datetime(1999, 12, 31, 23, 59, 59),
               dt.time(0, 0, 1), 1.5, "#DIV/0!", '=HYPERLINK("https://example.net","x")'])  # fmt: skip
    ws.append(["line\nbreak", 12345678901234, 0.1 + 0.2, None, None, None, None, None, None, None])
    ws.append(["ünïcödé ✅ 中文", 0, -0.5, None, None, None, None, None, None, "=SUM(B2:B4)"])
    ws["H2"].number_format = "0.0%"
    ws["H3"].number_format = "0%"
    ws["I5"] = dt.timedelta(hours=30)  # a duration
    ws["I5"].number_format = "[h]:mm:ss"
    ws.append([])
    ws.append([None, None, "after a gap"])
    ws.cell(row=9, column=40, value="far right")

    sparse = wb.create_sheet("Sparse")
    sparse["C3"] = "header starts late"
    sparse["D3"] = "second"
    sparse["C5"] = 1
    sparse.merge_cells("C7:E7")
    sparse["C7"] = "merged"

    wb.create_sheet("Empty")
    very = wb.create_sheet("Very hidden")
    very.sheet_state = "veryHidden"
    very.append(["secret"])
    assert_same_as_openpyxl(saved(wb))


def test_rich_text_and_shared_strings_match_openpyxl():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["note", "again"])
    ws.append([CellRichText(["plain ", TextBlock(InlineFont(b=True), "bold"), " tail"]), "note"])
    ws.append(["note", "note"])
    assert_same_as_openpyxl(saved(wb))


def test_shared_formulas_are_translated_for_every_cell():
    rows = [["a", "b", "sum"]] + [[i, i * 2, Formula(f"A{i + 1}+B{i + 1}", i * 3)] for i in range(1, 6)]
    data = write_xlsx([Sheet("S", rows, [8, 8, 8], {})], title="t")
    # Rewrite the formulas as one shared formula, the way Excel stores a filled-down column.
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        parts = {name: src.read(name) for name in src.namelist()}
    sheet = parts["xl/worksheets/sheet1.xml"].decode()
    sheet = sheet.replace("<f>A2+B2</f>", '<f t="shared" ref="C2:C6" si="0">A2+B2</f>')
    for r in range(3, 7):
        sheet = sheet.replace(f"<f>A{r}+B{r}</f>", '<f t="shared" si="0"/>')
    parts["xl/worksheets/sheet1.xml"] = sheet.encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, body in parts.items():
            dst.writestr(name, body)

    converted = convert(out.getvalue(), "shared.xlsx")
    (table,) = converted.tables
    assert [r[2] for r in table.rows] == ["3", "6", "9", "12", "15"]
    assert [r[2] for r in table.formulas] == [f"=A{r}+B{r}" for r in range(2, 7)]
    assert_same_as_openpyxl(out.getvalue())


@pytest.mark.parametrize("name", ["Q3 pipeline review.xlsx", "Customer feedback.xlsx"])
def test_demo_workbooks_match_openpyxl(name):
    assert_same_as_openpyxl(dict(demo_drive_files())[name])


def test_date1904_workbooks():
    wb = openpyxl.Workbook()
    wb.epoch = openpyxl.utils.datetime.CALENDAR_MAC_1904
    wb.active.append(["when"])
    wb.active.append([dt.date(2024, 2, 29)])
    data = saved(wb)
    assert convert(data, "mac.xlsx").tables[0].rows == [["2024-02-29"]]
    assert_same_as_openpyxl(data)


def test_a_doctype_is_refused():
    wb = openpyxl.Workbook()
    wb.active.append(["x"])
    with zipfile.ZipFile(io.BytesIO(saved(wb))) as src:
        parts = {name: src.read(name) for name in src.namelist()}
    laughs = b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
    body = parts["xl/worksheets/sheet1.xml"]
    parts["xl/worksheets/sheet1.xml"] = laughs + (
        body.split(b"?>", 1)[1] if body.startswith(b"<?xml") else body
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name, body in parts.items():
            dst.writestr(name, body)
    converted = convert(out.getvalue(), "laughs.xlsx")
    assert converted.error and "damaged" in converted.error and "DOCTYPE" in converted.error
