"""Word documents (.docx) to plain text with mammoth (its `extract_raw_text`: paragraphs, tables' cells,
lists, foot- and endnotes, one paragraph a line), inside the converter's sandbox like every other kind.

Before mammoth opens anything the container passes the same zip checks as a workbook (`open_zip_checked`:
members, declared unpacked size, expansion ratio, encryption). mammoth parses each XML part with minidom;
here that parse is defusedxml's with DTDs forbidden, so a part with a DOCTYPE (entity expansion, external
entities) is refused before a node is built, and mammoth never reads files outside the document
(`external_file_access=False`, its default). The text is capped at `max_text_chars`."""

from __future__ import annotations

import io
import xml.dom
from types import SimpleNamespace
from typing import IO, TYPE_CHECKING, Any, cast

from defusedxml import DefusedXmlException
from defusedxml import minidom as defused_minidom

from backend.convert.model import (
    DAMAGED_PART_ERRORS,
    ConversionFailed,
    Converted,
    ConvertLimits,
    Deadline,
    describe,
)
from backend.convert.sheets import open_zip_checked

if TYPE_CHECKING:
    import xml.dom.minidom

WHAT = "Word document"
# a damaged part surfaces as one of these from mammoth (a tuple named once: mypy reads a starred tuple inside
# `except (...)` as no exception type)
_DAMAGED: tuple[type[BaseException], ...] = (KeyError, AttributeError, TypeError, *DAMAGED_PART_ERRORS)


def _parse_without_dtd(fileobj: IO[bytes]) -> xml.dom.minidom.Document:
    return cast("xml.dom.minidom.Document", defused_minidom.parse(fileobj, forbid_dtd=True))


def _mammoth() -> Any:  # the module, which ships no annotations
    """mammoth, its XML parsing pointed at defusedxml (mammoth reads `xml.dom.minidom.parse` and
    `xml.dom.Node` through its module's `xml` name; only that module's view changes)."""
    import mammoth
    from mammoth.docx import xmlparser

    xmlparser.xml = SimpleNamespace(
        dom=SimpleNamespace(minidom=SimpleNamespace(parse=_parse_without_dtd), Node=xml.dom.Node)
    )
    return mammoth


def convert_docx(data: bytes, limits: ConvertLimits, deadline: Deadline) -> Converted:
    archive = open_zip_checked(data, limits, WHAT)
    if "word/document.xml" not in set(archive.namelist()):
        raise ConversionFailed(f"The {WHAT} is damaged: it has no document inside.")
    deadline.check()
    mammoth = _mammoth()
    try:
        result = mammoth.extract_raw_text(io.BytesIO(data))
    except DefusedXmlException as exc:
        raise ConversionFailed(
            f"The {WHAT} declares a DOCTYPE (entities), which no Word document needs; it was not read."
        ) from exc
    except _DAMAGED as exc:
        raise ConversionFailed(f"The {WHAT} is damaged and cannot be read ({describe(exc)}).") from exc
    deadline.check()
    text = "\n".join(line.rstrip() for line in result.value.replace("\r\n", "\n").split("\n"))
    text = text.strip("\n") + "\n" if text.strip() else ""
    converted = Converted(kind="docx", text=text)
    if len(text) > limits.max_text_chars:
        converted.text = text[: limits.max_text_chars]
        converted.text_truncated = True
        converted.warnings.append(f"Only the first {limits.max_text_chars:,} characters were kept.")
    if not text:
        converted.warnings.append("The document has no text.")
    return converted
