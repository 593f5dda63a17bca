"""What a file is, from its bytes: `sniff_kind(data, filename)`. The name only breaks ties among text kinds
(.md, .json, .csv vs .txt) and words the refusal; content we recognise but do not convert raises
ConversionFailed with a sentence a person can act on.

It runs in the API process, so it never inflates anything: a zip is typed from its central directory (the
member names) and, for OpenDocument, from the first bytes of a `mimetype` member stored uncompressed, as ODF
requires. A deflated `mimetype` is not read at all (the names decide); the converter, in its sandbox,
opens the file for real."""

from __future__ import annotations

import mmap
import os
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path

from backend.convert.model import ConversionFailed

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ODS_MIMETYPE = b"application/vnd.oasis.opendocument.spreadsheet"
MIMETYPE_PREFIX = 200  # bytes of a stored `mimetype` member read; the longest ODF type is under 80
# Central-directory records a zip may hold before sniffing refuses it unopened. zipfile builds one object per
# record (a 90 MB upload of empty members cost ~460 MB and 13 s); workbooks hold tens to a few thousand.
MAX_ZIP_MEMBERS = 20_000
CENTRAL_RECORD = b"PK\x01\x02"
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
    ".docx": "docx",
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
    "docx": "a Word document",
    "csv": "CSV text",
    "pdf": "a PDF",
    "image": "an image",
    "text": "plain text",
    "markdown": "Markdown text",
    "json": "JSON",
}


class MappedFile(mmap.mmap):
    """A file mapped read-only: sliced and searched like bytes, and a seekable file for zipfile, without
    reading it into memory (an upload of up to 100 MB streamed to disk is sniffed from here)."""

    def seekable(self) -> bool:
        return True


@contextmanager
def mapped(path: Path) -> Iterator[bytes | MappedFile]:
    """The file's content for `sniff_kind`: mapped, or b"" when it is empty (an empty file cannot be)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        if os.fstat(fd).st_size == 0:
            yield b""
            return
        view = MappedFile(fd, 0, access=mmap.ACCESS_READ)
        try:
            yield view
        finally:
            view.close()
    finally:
        os.close(fd)


def _count_upto(data: bytes | MappedFile, needle: bytes, cap: int) -> int:
    """How many times `needle` occurs, counting no further than cap + 1."""
    found, at = 0, data.find(needle)
    while at != -1 and found <= cap:
        found += 1
        at = data.find(needle, at + len(needle))
    return found


def sniff_kind(data: bytes | MappedFile, filename: str) -> str:
    """The kind from the bytes (or a mapped file); raises ConversionFailed for content we recognise but do
    not convert."""
    head = data[:2048]
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_kind(data, filename)
    if head.startswith(OLE_MAGIC):
        raise ConversionFailed(_ole_refusal(data))
    if head.lstrip()[:5] == b"%PDF-" or (b"%PDF-" in head[:1024] and extension(filename) == ".pdf"):
        return "pdf"  # readers accept junk before the header; a text file that mentions %PDF- is not a PDF
    for magic, _ in IMAGE_MAGIC:
        if head.startswith(magic):
            return "image"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image"
    if _is_bmp(head):
        return "image"
    return "text-like"


def _zip_kind(data: bytes | MappedFile, filename: str) -> str:
    # Every record zipfile reads starts with this signature, so the count bounds the objects it would build.
    if _count_upto(data, CENTRAL_RECORD, MAX_ZIP_MEMBERS) > MAX_ZIP_MEMBERS:
        raise ConversionFailed(
            f"The archive holds more than {MAX_ZIP_MEMBERS:,} members, which no supported document does;"
            " it was not opened."
        )
    try:
        archive = zipfile.ZipFile(data if isinstance(data, MappedFile) else BytesIO(data))
        names = set(archive.namelist())
        mimetype = _mimetype(archive) if "mimetype" in names else b""
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        OSError,
        EOFError,
        ValueError,
        KeyError,
        RuntimeError,  # an encrypted member
        NotImplementedError,  # a compression method zipfile does not know
    ) as exc:
        what = KIND_WORDS.get(EXTENSION_KINDS.get(extension(filename), ""), "")
        what = (
            what
            if what in (KIND_WORDS["xlsx"], KIND_WORDS["ods"], KIND_WORDS["docx"])
            else "a zip-based document"
        )
        raise ConversionFailed(
            f"The file looks like {what} but is damaged or incomplete (was the upload cut short?)."
        ) from exc
    if "xl/workbook.xml" in names:
        return "xlsx"
    if mimetype == ODS_MIMETYPE or (
        not mimetype and "content.xml" in names and extension(filename) == ".ods"
    ):
        return "ods"
    if "xl/workbook.bin" in names:
        raise ConversionFailed(
            "Excel binary workbooks (.xlsb) are not supported; save it as .xlsx and upload again."
        )
    if "word/document.xml" in names:
        return "docx"
    if mimetype.startswith(b"application/vnd.oasis.opendocument.text"):
        raise ConversionFailed(
            "OpenDocument text files (.odt) are not supported yet; save it as .docx or PDF and upload again."
        )
    if "ppt/presentation.xml" in names or mimetype.startswith(
        b"application/vnd.oasis.opendocument.presentation"
    ):
        raise ConversionFailed("Presentations are not supported yet; save it as PDF and upload again.")
    if "[Content_Types].xml" in names:
        raise ConversionFailed("This Office file is damaged: it has no workbook or document inside.")
    raise ConversionFailed("Zip archives are not supported; upload the files inside it one by one.")


def _mimetype(archive: zipfile.ZipFile) -> bytes:
    """The first bytes of the ODF `mimetype` member when it is stored (ODF requires it uncompressed), else
    b"": a compressed member is never inflated here, however small it claims to be (a 400 KB file can
    declare gigabytes), and the member names decide instead."""
    if archive.getinfo("mimetype").compress_type != zipfile.ZIP_STORED:
        return b""
    with archive.open("mimetype") as member:
        return member.read(MIMETYPE_PREFIX).strip()


def _ole_refusal(data: bytes | MappedFile) -> str:
    def has(word: str) -> bool:
        return data.find(word.encode("utf-16-le")) != -1

    if has("EncryptedPackage") or has("EncryptionInfo"):
        return "The file is password-protected (an encrypted Office file); remove the password and upload it again."
    if has("Workbook") or has("Book"):
        return "Old Excel 97–2003 workbooks (.xls) are not supported; save it as .xlsx and upload again."
    if has("WordDocument"):
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


def extension(filename: str) -> str:
    name = filename.rsplit("/", 1)[-1].lower()
    return "." + name.rsplit(".", 1)[1] if "." in name.strip(".") else ""
