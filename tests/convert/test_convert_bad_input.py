"""Damaged, hostile or oversized files come back as a clear error sentence; conversion never raises."""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib

import openpyxl
import pytest

from backend.convert import Converted, ConvertLimits, convert
from backend.demo.files import demo_drive_files


def xlsx_bytes(rows: int = 3, columns: int = 3) -> bytes:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append([f"col{c}" for c in range(columns)])
    for r in range(rows):
        ws.append([r * columns + c for c in range(columns)])
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def assert_refused(converted: Converted, *words: str) -> None:
    assert converted.error, "expected an error"
    assert converted.error.endswith("."), converted.error  # a sentence, not an exception repr
    assert "Traceback" not in converted.error
    for word in words:
        assert word.lower() in converted.error.lower(), converted.error
    assert converted.tables == [] and converted.text is None and not converted.keep_original
    assert converted.bundle_files("x") == []


# --- damaged and unsupported files ------------------------------------------------------------------------


def test_truncated_workbook():
    data = xlsx_bytes()
    assert_refused(convert(data[: len(data) // 2], "Q3 plan.xlsx"), "damaged")


def test_random_bytes_named_xlsx():
    noise = random.Random(7).randbytes(20_000)
    assert_refused(convert(noise, "Q3 plan.xlsx"), "not a format")


def test_zip_with_a_broken_workbook_part():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/workbook.xml", "<workbook><sheets><sheet")
    assert_refused(convert(out.getvalue(), "broken.xlsx"), "damaged")


def cfb(streams: dict[str, bytes]) -> bytes:
    """A minimal, structurally valid Compound File (OLE2), the container of password-protected Office files.

    Streams are padded to 4096 bytes so they live in regular sectors (no mini stream needed).
    """
    sector = 512
    free, end, fat_sector = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
    bodies = [data.ljust(max(4096, -(-len(data) // sector) * sector), b"\0") for data in streams.values()]
    fat = [fat_sector, end]  # sector 0: the FAT itself, sector 1: the directory
    starts = []
    for body in bodies:
        count = len(body) // sector
        starts.append(len(fat))
        fat.extend(range(len(fat) + 1, len(fat) + count))
        fat.append(end)
    assert len(fat) <= sector // 4
    fat += [free] * (sector // 4 - len(fat))

    def entry(name: str, kind: int, start: int, size: int, left=free, right=free, child=free) -> bytes:
        encoded = (name + "\0").encode("utf-16-le")
        return (
            encoded.ljust(64, b"\0")
            + struct.pack("<HBBIII", len(encoded), kind, 1, left, right, child)
            + b"\0" * 36
            + struct.pack("<IQ", start, size)
        )

    names = list(streams)
    directory = entry("Root Entry", 5, end, 0, child=1)
    for i, (name, start, data) in enumerate(zip(names, starts, streams.values(), strict=True), start=1):
        directory += entry(name, 2, start, len(data), right=i + 1 if i < len(names) else free)
    directory = directory.ljust(sector, b"\0")
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + b"\0" * 16
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + b"\0" * 6
        + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, end, 0, end, 0)
    )
    difat = struct.pack("<I", 0) + struct.pack("<I", free) * 108
    return header + difat + struct.pack(f"<{len(fat)}I", *fat) + directory + b"".join(bodies)


def test_password_protected_workbook_is_recognised():
    encrypted = cfb(
        {
            "EncryptionInfo": b"\x04\x00\x04\x00\x40\x00\x00\x00" + b"<encryption/>",
            "EncryptedPackage": struct.pack("<Q", 9000) + random.Random(3).randbytes(9000),
        }
    )
    assert len(encrypted) % 512 == 0
    assert_refused(convert(encrypted, "Payroll.xlsx"), "password-protected")


def test_old_excel_format_is_refused_with_advice():
    assert_refused(
        convert(cfb({"Workbook": b"\x09\x08" + b"\0" * 100}), "old.xls"), ".xls", "save it as .xlsx"
    )


def test_encrypted_pdf_needs_its_password():
    from pypdf import PdfReader, PdfWriter

    source = PdfReader(io.BytesIO(dict(demo_drive_files())["Vendor price list.pdf"]))
    for algorithm in ("RC4-128", "AES-256"):
        writer = PdfWriter()
        writer.append(source)
        writer.encrypt(user_password="s3cret", owner_password="owner", algorithm=algorithm)
        out = io.BytesIO()
        writer.write(out)
        assert_refused(convert(out.getvalue(), "prices.pdf"), "password-protected")


def test_pdf_with_only_an_owner_password_is_readable():
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(dict(demo_drive_files())["Vendor price list.pdf"])))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    converted = convert(out.getvalue(), "prices.pdf")
    assert converted.error is None
    assert "VP-1002" in converted.text


def test_damaged_pdf():
    data = dict(demo_drive_files())["Vendor price list.pdf"]
    converted = convert(data[:200], "prices.pdf")
    assert converted.kind == "pdf"
    assert converted.error or converted.text is not None  # never raises; tiny fragments may parse as empty


def test_invalid_json():
    converted = convert(b'{"customers": [1, 2,, 3]}', "export.json")
    assert converted.kind == "json"
    assert_refused(converted, "not valid JSON", "line 1")


@pytest.mark.parametrize(
    ("data", "name", "words"),
    [
        (b"", "empty.csv", ["empty"]),
        (b"PK\x05\x06" + b"\0" * 18, "archive.zip", ["zip archives are not supported"]),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "broken.png", ["image"]),
    ],
)
def test_other_unusable_files(data, name, words):
    assert_refused(convert(data, name), *words)


def test_opendocument_text_is_refused_with_advice():
    # Word documents convert now (tests/convert/test_convert_docx.py); .odt is still refused, with advice
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("content.xml", "<office:document-content/>")
    assert_refused(convert(out.getvalue(), "letter.odt"), "not supported", ".docx or PDF")


# --- limits -----------------------------------------------------------------------------------------------


def bomb(member_bytes: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("xl/workbook.xml", "<workbook/>")
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as member:
            chunk = b"\0" * (1 << 20)
            for _ in range(member_bytes >> 20):
                member.write(chunk)
    return out.getvalue()


def test_zip_bomb_is_refused_before_any_parser_opens_it(monkeypatch):
    import backend.convert.xlsx as convert_xlsx

    def must_not_parse(*_args, **_kwargs):
        raise AssertionError("the workbook parser was reached")

    monkeypatch.setattr(convert_xlsx, "_convert", must_not_parse)
    data = bomb(64 << 20)
    assert len(data) < 200_000
    assert_refused(convert(data, "bomb.xlsx"), "decompression bomb")
    assert_refused(
        convert(data, "bomb.xlsx", limits=ConvertLimits(max_unzipped_bytes=16 << 20)),
        "decompression bomb",
        "MiB",
    )


def test_ods_zip_bomb_is_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", b" " * (40 << 20))
    assert_refused(convert(out.getvalue(), "bomb.ods"), "decompression bomb")


def test_sheet_over_the_row_limit_is_cut_and_says_so():
    limits = ConvertLimits(max_rows_per_sheet=1000)
    converted = convert(xlsx_bytes(rows=2500, columns=4), "big.xlsx", limits=limits)

    assert converted.error is None
    (big,) = converted.tables
    assert big.truncated and len(big.rows) == 1000 and big.total_rows == 2500
    assert big.rows[-1][0] == str(999 * 4)
    assert any("cut to 1,000 of 2,500 rows" in w for w in converted.warnings)
    meta = converted.bundle_files("big")[0][2]
    assert (meta["rows"], meta["total_rows"], meta["truncated"]) == (1000, 2500, True)


@pytest.mark.slow
def test_default_row_limit_of_100_000():
    body = "id,amount\n" + "".join(f"{i},{i % 97}\n" for i in range(100_250))
    converted = convert(body.encode(), "ledger.csv", limits=ConvertLimits(time_limit_seconds=120))

    (ledger,) = converted.tables
    assert ConvertLimits().max_rows_per_sheet == 100_000
    assert ledger.truncated and len(ledger.rows) == 100_000 and ledger.total_rows == 100_250


def test_cell_limit_cuts_the_workbook():
    converted = convert(xlsx_bytes(rows=300, columns=10), "wide.xlsx", limits=ConvertLimits(max_cells=1000))
    (wide,) = converted.tables
    assert wide.truncated and len(wide.rows) < 100
    assert any("cells" in w for w in converted.warnings)


def test_time_limit():
    converted = convert(xlsx_bytes(rows=50), "slow.xlsx", limits=ConvertLimits(time_limit_seconds=0))
    assert_refused(converted, "longer than the 0 s limit")


def test_input_size_limit():
    assert_refused(convert(b"a,b\n" * 100, "x.csv", limits=ConvertLimits(max_input_bytes=100)), "over the")


def test_too_many_pdf_pages_are_cut():
    from pypdf import PdfReader, PdfWriter

    page = PdfReader(io.BytesIO(dict(demo_drive_files())["Vendor price list.pdf"])).pages[0]
    writer = PdfWriter()
    for _ in range(5):
        writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)

    converted = convert(out.getvalue(), "long.pdf", limits=ConvertLimits(max_pdf_pages=2))
    assert converted.error is None
    assert converted.pages == 5 and converted.text.count("--- page") == 2
    assert converted.text_truncated
    assert any("first 2 of 5 pages" in w for w in converted.warnings)


def png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def test_image_pixel_bombs_are_refused():
    assert_refused(convert(png_header_only(60_000, 60_000), "huge.png"), "too large")
    assert_refused(
        convert(png_header_only(9_000, 9_000), "big.png", limits=ConvertLimits(max_image_pixels=10_000_000)),
        "pixel limit",
    )


def test_deep_json_nesting():
    assert_refused(convert(b"[" * 100_000 + b"]" * 100_000, "deep.json"), "nested too deeply")


# --- never raises ---------------------------------------------------------------------------------------


def test_mangled_versions_of_every_demo_file_never_raise():
    rng = random.Random(1)
    limits = ConvertLimits(time_limit_seconds=10, max_ocr_pages=1)
    samples = [*demo_drive_files(), ("small.xlsx", xlsx_bytes())]
    for name, data in samples:
        variants = [data[: len(data) * k // 8] for k in range(1, 8)]
        for _ in range(4):
            flipped = bytearray(data)
            for _ in range(8):
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            variants.append(bytes(flipped))
        for variant in variants:
            converted = convert(variant, name, limits=limits)
            assert isinstance(converted, Converted)
            assert converted.error is None or converted.error.strip()


def test_a_long_pdf_keeps_the_pages_read_in_time(monkeypatch):
    from pypdf import PdfReader, PdfWriter

    from backend.convert import model as convert_model

    page = PdfReader(io.BytesIO(dict(demo_drive_files())["Vendor price list.pdf"])).pages[0]
    writer = PdfWriter()
    for _ in range(4):
        writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    # A clock that jumps 10 s every time it is read: the limit passes after the first pages.
    ticks = iter(range(0, 10_000, 10))
    monkeypatch.setattr(convert_model.time, "monotonic", lambda: next(ticks))

    converted = convert(out.getvalue(), "long.pdf", limits=ConvertLimits(time_limit_seconds=25))
    assert converted.error is None
    assert converted.text_truncated
    assert 1 <= converted.text.count("--- page") < 4
    assert any("within the 25 s time limit" in w for w in converted.warnings)


def test_password_protected_ods_is_recognised():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", random.Random(4).randbytes(2000))
        archive.writestr(
            "META-INF/manifest.xml",
            '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
            '<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/>'
            "</manifest:file-entry></manifest:manifest>",
        )
    assert_refused(convert(out.getvalue(), "budget.ods"), "password-protected")
