"""Word documents (.docx) to text, in the confined converter (mammoth), within its limits: a real document
converts (in the sandbox as in-process); a bomb, a damaged one, one with a DOCTYPE, and a file named .docx
that is something else are each refused with a sentence a person can act on, and Drive keeps none of
those it can tell at upload (nothing stored), beside a good document it keeps."""

from __future__ import annotations

import io
import zipfile

import pytest

from backend.convert import convert
from backend.convert.isolated import convert_isolated
from backend.drive.tables import DriveFile
from backend.settings import get_settings
from tests.support.drive import _upload
from tests.support.http import token_for

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
TYPES = (
    '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/></Types>'
)
RELS = (
    '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Target="word/document.xml" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/></Relationships>'
)


def document_xml(body: str, prolog: str = "") -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>'


def paragraphs(*texts: str) -> str:
    return "".join(f"<w:p><w:r><w:t>{t}</w:t></w:r></w:p>" for t in texts)


def docx(document: str, *extra: tuple[str, bytes | str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", TYPES)
        archive.writestr("_rels/.rels", RELS)
        archive.writestr("word/document.xml", document)
        for name, data in extra:
            archive.writestr(name, data)
    return out.getvalue()


REPORT = docx(
    document_xml(
        paragraphs("Quarterly report", "East grew 12 % — ahead of plan")
        + f'<w:tbl xmlns:w="{W}"><w:tr><w:tc>{paragraphs("Region")}</w:tc><w:tc>{paragraphs("East")}</w:tc>'
        "</w:tr></w:tbl>"
    )
)
BOMB = docx(document_xml(paragraphs("tiny")), ("word/media/filler.bin", b"\0" * (24 * 1024 * 1024)))
LAUGHS = document_xml(
    paragraphs("&lol3;"),
    '<!DOCTYPE w:document [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>',
)


def test_a_word_document_converts_to_its_text_in_the_sandbox_as_in_process() -> None:
    isolated, local = convert_isolated(REPORT, "Report.docx"), convert(REPORT, "Report.docx")
    assert isolated.error is None, isolated.error
    assert isolated.kind == "docx" and "Quarterly report" in isolated.text
    assert "East grew 12 % — ahead of plan" in isolated.text and "Region" in isolated.text
    isolated.elapsed_ms = local.elapsed_ms = 0
    assert isolated == local
    [(name, content, meta)] = isolated.bundle_files("report")
    assert name == "report.txt" and content.decode() == isolated.text and meta["kind"] == "docx"


def test_hostile_and_broken_word_documents_are_refused_clearly() -> None:
    cases = {
        "bomb": (BOMB, "decompression bomb"),
        "laughs": (docx(LAUGHS), "DOCTYPE"),
        "no body": (docx("<document/>"), "damaged"),
        "not xml": (docx("<<<"), "damaged"),
        "cut short": (REPORT[: len(REPORT) // 2], "damaged or incomplete"),
        "text named .docx": (b"Dear team, this is not a Word file.\n", "not a Word document"),
        "png named .docx": (
            b"\x89PNG\r\n\x1a\n" + b"\0" * 64,
            "not a Word document (its content is an image)",
        ),
    }
    for case, (data, words) in cases.items():
        converted = convert(data, "letter.docx")
        assert converted.error is not None and words in converted.error, (case, converted.error)
        assert converted.text is None and converted.tables == [], case
    assert convert(docx(document_xml(paragraphs("fine"))), "letter.docx").text == "fine\n"  # control


def _leftovers() -> list[str]:
    root = get_settings().data_dir / "blobs"
    return sorted(p.name for p in root.glob(".upload-*")) if root.exists() else []


@pytest.mark.sqlite  # the converter's refusal comes before anything reaches the database
async def test_drive_stores_no_word_document_the_converter_would_refuse(client) -> None:
    alice = await token_for(client, "alice@acme.example")
    before = await DriveFile.count()
    for name, data, words in (
        ("bomb.docx", BOMB, "decompression bomb"),
        ("cut.docx", REPORT[: len(REPORT) // 2], "damaged or incomplete"),
        ("notes.docx", b"plain text, not a document\n", "not a Word document"),
    ):
        r = await _upload(client, alice, name, data)
        assert r.status_code == 422 and r.json()["error"] == "unreadable_document", r.text
        assert words in r.json()["detail"] and "was not stored" in r.json()["detail"]
    assert await DriveFile.count() == before and _leftovers() == []
    r = await _upload(client, alice, "Report.docx", REPORT)  # control: a real document is kept
    assert r.status_code == 201 and r.json()["kind"] == "docx", r.text
