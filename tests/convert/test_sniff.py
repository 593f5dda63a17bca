"""What a file is, from its bytes, without doing the file's work: a zip's `mimetype` member is read only as far
as its first bytes, however large it says it is (finding H3: a 400 KB upload declaring gigabytes), and only
when it is stored: a deflated one is never inflated in the API process (issue 15)."""

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


def _ods(mimetype_compression: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", ODS_MIMETYPE, compress_type=mimetype_compression)
        archive.writestr("content.xml", b"<office:document-content/>")
    return buf.getvalue()


@pytest.fixture
def no_inflating(monkeypatch) -> list[str]:
    """zlib's decompressor, the one zipfile inflates a deflated member with, refuses to run and says so."""
    calls: list[str] = []

    def refuse(*_: object) -> None:
        calls.append("decompressobj")
        raise AssertionError("a zip member was inflated in the API process")

    monkeypatch.setattr(zipfile.zlib, "decompressobj", refuse)
    return calls


def test_a_deflated_mimetype_member_is_never_inflated(no_inflating: list[str]) -> None:
    """Adversary: the `mimetype` member compressed (ODF stores it; a bomb deflates it). Sniffing in the API
    process decides from the member names alone and leaves the member to the sandboxed converter."""
    data = _ods(zipfile.ZIP_DEFLATED)
    assert zipfile.ZipFile(io.BytesIO(data)).getinfo("mimetype").compress_type == zipfile.ZIP_DEFLATED
    assert sniff_kind(data, "budget.ods") == "ods"  # content.xml and the name
    with pytest.raises(ConversionFailed, match="Zip archives are not supported"):
        sniff_kind(data, "budget.bin")  # the names alone do not say ODS; the member stays unread
    assert no_inflating == []


def test_positive_control_reading_a_deflated_mimetype_calls_the_decompressor(no_inflating: list[str]) -> None:
    """What sniffing did before: the first 200 bytes of the member, which inflates it."""
    archive = zipfile.ZipFile(io.BytesIO(_ods(zipfile.ZIP_DEFLATED)))
    with pytest.raises(AssertionError, match="inflated"), archive.open("mimetype") as member:
        member.read(200)
    assert no_inflating == ["decompressobj"]


def test_positive_control_a_stored_mimetype_is_still_read(no_inflating: list[str]) -> None:
    assert sniff_kind(_ods(zipfile.ZIP_STORED), "budget.bin") == "ods"  # the member said so, not the name
    assert no_inflating == []


def test_a_damaged_mimetype_member_is_a_refusal_not_a_crash() -> None:
    data = bytearray(_ods(zipfile.ZIP_STORED))
    start = data.index(b"mimetype")  # the first local header's name: it no longer matches the directory's
    data[start : start + 8] = b"\xff" * 8
    with pytest.raises(ConversionFailed, match="damaged"):
        sniff_kind(bytes(data), "budget.ods")


def test_a_damaged_deflated_mimetype_is_left_to_the_converter() -> None:
    """Its bytes are never inflated here, so their damage is the sandboxed converter's to find."""
    data = bytearray(_ods(zipfile.ZIP_DEFLATED))
    start = data.index(b"mimetype") + len(b"mimetype")  # the first local header's name, then its data
    data[start : start + 20] = b"\xff" * 20
    assert sniff_kind(bytes(data), "budget.ods") == "ods"
