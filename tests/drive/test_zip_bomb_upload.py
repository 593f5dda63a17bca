"""A zip bomb uploaded to the Drive is typed without being inflated in the API process.

The bomb is a valid ~3 MB zip whose `mimetype` member declares (and really inflates to) 3 GiB: the ODS type
followed by spaces. It is built by hand from one deflate block repeated (a full flush resets the compressor,
so every block of spaces compresses to the same bytes), which takes seconds instead of deflating 3 GiB.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from backend.convert.sniff import MAX_ZIP_MEMBERS, ODS_MIMETYPE
from tests.support.http import token_for

pytestmark = pytest.mark.hardening

MIB = 1 << 20
DECLARED = 3 * 1024 * MIB  # the member's inflated size: 3 GiB, under the 4 GiB a zip64 record would need
REPO = Path(__file__).resolve().parents[2]


def _zip(members: list[tuple[bytes, int, bytes, int, int]]) -> bytes:
    """A zip from (name, method, compressed, size, crc) members, written by hand."""
    out = io.BytesIO()
    central = []
    for name, method, compressed, size, crc in members:
        offset = out.tell()
        out.write(
            struct.pack(
                "<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(compressed), size, len(name), 0
            )
        )
        out.write(name + compressed)
        central.append(
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                20,
                20,
                0,
                method,
                0,
                0,
                crc,
                len(compressed),
                size,
                len(name),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + name
        )
    directory = b"".join(central)
    start = out.tell()
    out.write(directory)
    out.write(
        struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), start, 0)
    )
    return out.getvalue()


def _stored(name: str, data: bytes) -> tuple[bytes, int, bytes, int, int]:
    return name.encode(), zipfile.ZIP_STORED, data, len(data), zlib.crc32(data)


def _ods_bomb() -> bytes:
    first = ODS_MIMETYPE + b" " * (MIB - len(ODS_MIMETYPE))
    rest = b" " * MIB
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate, as in a zip
    head = compressor.compress(first) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(rest) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert block == compressor.compress(rest) + compressor.flush(zlib.Z_FULL_FLUSH)  # repeatable
    count = DECLARED // MIB - 1
    stream = head + block * count + compressor.flush(zlib.Z_FINISH)
    crc = zlib.crc32(first)
    for _ in range(count):
        crc = zlib.crc32(rest, crc)
    mimetype = (b"mimetype", zipfile.ZIP_DEFLATED, stream, DECLARED, crc)
    return _zip([mimetype, _stored("content.xml", b"<office:document-content/>")])


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "budget.ods"
    path.write_bytes(_ods_bomb())
    return path


async def _upload(client, headers, name: str, data: bytes):
    return await client.post(
        "/api/drive/files", files={"file": (name, data, "application/octet-stream")}, headers=headers
    )


def test_the_bomb_is_small_valid_and_declares_gibibytes(bomb: Path) -> None:
    data = bomb.read_bytes()
    assert len(data) < 4 * MIB
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.getinfo("mimetype").file_size == DECLARED
    with archive.open("mimetype") as member:  # really inflates: 8 MiB of it, as a sample
        sample = member.read(8 * MIB)
    assert sample.startswith(ODS_MIMETYPE) and len(sample) == 8 * MIB and sample.endswith(b" ")


@pytest.mark.sqlite
async def test_a_zip_bomb_upload_is_typed_without_inflating_it(client, bomb: Path) -> None:
    data = bomb.read_bytes()
    alice = await token_for(client, "alice@acme.example")
    tracemalloc.start()
    try:
        r = await _upload(client, alice, "budget.ods", data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "ods"  # from the member names: a deflated `mimetype` is never read here
    # the request holds the upload a few times over (multipart parsing, hashing, storing); 3 GiB never
    assert peak < 64 * MIB, f"the upload allocated {peak:,} bytes"


@pytest.mark.sqlite
async def test_positive_control_normal_zip_documents_are_still_typed(client) -> None:
    from backend.demo.files import demo_drive_files

    alice = await token_for(client, "alice@acme.example")
    xlsx = next(data for name, data in demo_drive_files() if name.endswith(".xlsx"))
    ods = io.BytesIO()
    with zipfile.ZipFile(ods, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), ODS_MIMETYPE)
        archive.writestr("content.xml", "<office:document-content/>")
    docx = io.BytesIO()
    with zipfile.ZipFile(docx, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<document/>")
    for name, data, kind in [
        ("sales.xlsx", xlsx, "xlsx"),
        ("sheet.ods", ods.getvalue(), "ods"),
        ("letter.docx", docx.getvalue(), "docx"),  # a Word document Drive keeps (mammoth at staging)
    ]:
        r = await _upload(client, alice, name, data)
        assert r.status_code == 201, r.text
        assert r.json()["kind"] == kind, name


# --- peak RSS of a fresh process typing the bomb the way the upload does ---------------------------------

_MEASURE = textwrap.dedent(
    """
    import io, json, resource, sys, zipfile
    from backend.drive.service import drive_kind
    data = open(sys.argv[1], "rb").read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.argv[2] == "sniff":
        kind = drive_kind(data, "budget.ods")
    else:  # the positive control: inflate 512 MiB of the member, as an unbounded read would (and more)
        with zipfile.ZipFile(io.BytesIO(data)).open("mimetype") as member:
            kind = str(len(member.read(512 << 20)))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"kind": kind, "delta_kib": after - before}))
    """
)


def _rss_delta(path: Path, mode: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout)
    return result["kind"], result["delta_kib"] * 1024


def test_typing_the_bomb_raises_peak_rss_by_a_bounded_amount(bomb: Path) -> None:
    kind, delta = _rss_delta(bomb, "sniff")
    print(f"peak RSS delta typing a {DECLARED >> 30} GiB-declaring bomb: {delta / MIB:.1f} MiB")
    assert kind == "ods"
    assert delta < 32 * MIB, f"typing the bomb raised peak RSS by {delta / MIB:.0f} MiB"


def test_positive_control_the_rss_measure_sees_an_inflated_member(bomb: Path) -> None:
    kind, delta = _rss_delta(bomb, "inflate")
    assert kind == str(512 * MIB)
    # well above the 32 MiB bound above; not the full 512 MiB, as the host may reclaim pages meanwhile
    # (measured 285 MiB on a loaded CI host with DAMON reclaim running)
    assert delta > 128 * MIB


# --- an archive of very many members ----------------------------------------------------------------------


def _many_members(count: int) -> bytes:
    return _zip([_stored(f"{i:07d}", b"") for i in range(count)])


def test_an_archive_of_too_many_members_is_refused_unopened(monkeypatch) -> None:
    from backend.convert import ConversionFailed, sniff_kind
    from backend.drive.service import drive_kind

    opened = []
    monkeypatch.setattr(zipfile.ZipFile, "__init__", lambda *a, **k: opened.append(1) or None)
    data = _many_members(MAX_ZIP_MEMBERS + 1)
    with pytest.raises(ConversionFailed, match="more than"):
        sniff_kind(data, "many.xlsx")
    assert drive_kind(data, "many.xlsx") == "binary"
    assert opened == []


def test_positive_control_an_archive_at_the_member_cap_is_opened() -> None:
    from backend.convert import ConversionFailed, sniff_kind

    with pytest.raises(ConversionFailed, match="Zip archives are not supported"):  # opened and read
        sniff_kind(_many_members(MAX_ZIP_MEMBERS), "many.zip")
