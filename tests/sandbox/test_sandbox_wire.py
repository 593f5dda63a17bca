"""The host reads the guest's output disk as hostile input: bounds, hashes, names, actions."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from types import ModuleType

import pytest

from backend.sandbox import wire
from backend.sandbox.output import parse_actions, safe_name


def _write_result(path: Path, record: dict, payload: bytes, *, lie_about_len: int | None = None) -> None:
    """A hostile guest's writer: any blob layout and any declared length, with a matching digest."""
    body = json.dumps(record).encode()
    wire.create_output_disk(path, 4 * 1024 * 1024)
    digest = hashlib.sha256(body + payload).digest()
    payload_len = len(payload) if lie_about_len is None else lie_about_len
    with open(path, "r+b") as fh:
        fh.seek(wire.RESULT_JSON_OFFSET)
        fh.write(body)
        fh.seek(wire.RESULT_PAYLOAD_OFFSET)
        fh.write(payload)
        fh.seek(wire.RESULT_HEADER_OFFSET)
        fh.write(wire.RESULT_MAGIC + struct.pack(">QQ", len(body), payload_len) + digest)


def _agent_writes_result(agent: ModuleType, disk: Path, record: dict, blobs: list[bytes]) -> None:
    wire.create_output_disk(disk, 4 * 1024 * 1024)
    agent.OUT_DEV = str(disk)
    try:
        agent.write_result(record, blobs)
    finally:
        agent.OUT_DEV = "/dev/vdc"


def test_a_complete_result_parses_and_blobs_are_bounded(guest_agent: ModuleType, tmp_path: Path) -> None:
    disk = tmp_path / "out.img"
    _agent_writes_result(guest_agent, disk, {"nonce": "n"}, [b"hello", b"123"])
    result = wire.read_result(disk)
    assert result is not None
    assert result.blob(0, 100) == b"hello"
    assert result.blob(1, 100) == b"123"
    with pytest.raises(wire.WireError):
        result.blob(1, 2)  # over the caller's limit
    with pytest.raises(wire.WireError):
        result.blob(2, 100)  # no such blob


def test_blob_pointing_outside_the_payload_is_refused(tmp_path: Path) -> None:
    disk = tmp_path / "out.img"
    _write_result(disk, {"blobs": [{"offset": 4, "size": 1 << 20}]}, b"abcdef")
    result = wire.read_result(disk)
    with pytest.raises(wire.WireError):
        result.blob(0, 1 << 30)


def test_an_incomplete_or_tampered_result_is_not_read(guest_agent: ModuleType, tmp_path: Path) -> None:
    disk = tmp_path / "out.img"
    wire.create_output_disk(disk, 1 << 20)
    assert wire.poll_result(disk) == (None, False)  # nothing written yet
    _agent_writes_result(guest_agent, disk, {"x": 1}, [b"payload"])
    assert wire.poll_result(disk)[0] is not None
    with open(disk, "r+b") as fh:
        fh.seek(wire.RESULT_PAYLOAD_OFFSET)
        fh.write(b"PAYLOAD")
    assert wire.read_result(disk) is None  # hash mismatch = still being written (or forged)
    assert wire.poll_result(disk) == (None, True)  # ... which the caller is told, to back off


def test_lengths_beyond_the_disk_are_an_error(tmp_path: Path) -> None:
    disk = tmp_path / "out.img"
    _write_result(disk, {"x": 1}, b"p", lie_about_len=1 << 40)
    with pytest.raises(wire.WireError):
        wire.read_result(disk)


def test_job_disk_round_trip_layout(tmp_path: Path) -> None:
    source = tmp_path / "data.csv"
    source.write_bytes(b"a,b\n1,2\n")
    disk = tmp_path / "job.img"
    wire.write_job_disk(disk, 1 << 20, {"code": "print(1)"}, [("data.csv", source)])
    raw = disk.read_bytes()
    assert raw.startswith(wire.JOB_MAGIC)
    json_len, payload_len = struct.unpack(">QQ", raw[16:32])
    body = raw[wire.BLOCK : wire.BLOCK + json_len + payload_len]
    assert hashlib.sha256(body).digest() == raw[32:64]
    job = json.loads(body[:json_len])
    assert job["inputs"] == [{"name": "data.csv", "offset": 0, "size": 8}]
    assert body[json_len:] == b"a,b\n1,2\n"
    with pytest.raises(ValueError):
        wire.write_job_disk(tmp_path / "small.img", 4096, {"code": "x" * 10000}, [])


@pytest.mark.parametrize(
    "name", ["..", ".", "", "a/b", "../x", "a\\b", "bad\nname", "actions.json", "x" * 300, 7]
)
def test_unsafe_output_names_are_refused(name: object) -> None:
    assert not safe_name(name)


@pytest.mark.parametrize("name", ["chart.png", "report final.xlsx", "résumé.txt", ".hidden"])
def test_ordinary_output_names_are_accepted(name: str) -> None:
    assert safe_name(name)


def test_actions_must_be_a_list_of_objects() -> None:
    assert parse_actions(b'[{"type": "update"}]') == ([{"type": "update"}], None)
    assert parse_actions(b'{"actions": [{"type": "x"}]}') == ([{"type": "x"}], None)
    for raw in (b"{not json", b'"text"', b"[1, 2]", b"\xff\xfe"):
        actions, problem = parse_actions(raw)
        assert actions is None and problem
