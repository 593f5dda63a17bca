"""What a file is, from its bytes, without doing the file's work: a zip's `mimetype` member is read only as far
as its first bytes, however large it says it is (finding H3: a 400 KB upload declaring gigabytes)."""

from __future__ import annotations

import io
import tracemalloc
import zipfile

import pytest

from backend.convert import ConversionFailed, sniff_kind
from backend.convert.sniff import ODS_MIMETYPE

INFLATED = 256 * 2**20  # what the bomb's `mimetype` member declares and inflates to


def _bomb() -> bytes:
    """An ODS zip whose `mimetype` member is the real type followed by 256 MiB of spaces (~250 KB)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("content.xml", b"<office:document-content/>")
        with archive.open("mimetype", "w", force_zip64=True) as member:
            member.write(ODS_MIMETYPE)
            chunk = b" " * 2**20
            for _ in range(INFLATED // len(chunk)):
                member.write(chunk)
    return buf.getvalue()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return _bomb()


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_zip_bomb_mimetype_is_sniffed_without_inflating_it(bomb: bytes) -> None:
    assert len(bomb) < 2**20
    peak = _peak_bytes(lambda: sniff_kind(bomb, "budget.ods"))
    assert sniff_kind(bomb, "budget.ods") == "ods"
    assert peak < 8 * 2**20, f"sniffing allocated {peak:,} bytes"


def test_positive_control_reading_the_whole_member_inflates_it(bomb: bytes) -> None:
    """The read sniffing must not do: the whole member, as `archive.read("mimetype")` did."""
    archive = zipfile.ZipFile(io.BytesIO(bomb))
    assert _peak_bytes(lambda: archive.read("mimetype")) > INFLATED


def test_a_damaged_mimetype_member_is_a_refusal_not_a_crash() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", ODS_MIMETYPE * 100)
        archive.writestr("content.xml", b"<x/>")
    data = bytearray(buf.getvalue())
    start = data.index(b"mimetype") + len(b"mimetype")  # the first local header's name, then its data
    data[start : start + 40] = b"\xff" * 40
    with pytest.raises(ConversionFailed, match="damaged"):
        sniff_kind(bytes(data), "budget.ods")
