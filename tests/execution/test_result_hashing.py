"""Result hashing is bounded per run (issue 15): a root guest that forges RESULT headers could make the host
re-hash the whole result area (~59 MiB) every 10 ms. The host hashes a header once (the guest writes it
last, after the payload and an fsync, so a failed digest stays failed until the header changes), and at
most MAX_RESULT_HASHES headers / MAX_RESULT_HASH_BYTES bytes per run; a further new header is a protocol
error that ends the run. The honest agent's result is read after a forged header (positive control)."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import pytest

from backend.sandbox import vm, wire
from backend.sandbox.image import ImageInfo
from backend.sandbox.models import RunLimits
from tests.support.guest import load_guest_agent

pytestmark = pytest.mark.hardening

PAYLOAD = 2 * 1024 * 1024
DISK = PAYLOAD + wire.RESULT_PAYLOAD_OFFSET + 1024 * 1024


def _disk(tmp_path: Path) -> Path:
    disk = tmp_path / "out.img"
    wire.create_output_disk(disk, DISK)
    return disk


def _forge(disk: Path, salt: int = 0) -> None:
    """A RESULT header claiming the whole payload area, with a digest that never matches."""
    with open(disk, "r+b") as fh:
        fh.seek(wire.RESULT_HEADER_OFFSET)
        fh.write(wire.RESULT_MAGIC + struct.pack(">QQ", 2, PAYLOAD) + salt.to_bytes(32, "big"))


def _honest(disk: Path, record: dict, blobs: list[bytes]) -> None:
    agent = load_guest_agent()
    agent.OUT_DEV = str(disk)
    agent.write_result(record, blobs)


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of every digest the host computes over the result area."""
    sizes: list[int] = []
    real = wire.hashlib.sha256

    def counting(data: bytes = b""):
        sizes.append(len(data))
        return real(data)

    monkeypatch.setattr(wire.hashlib, "sha256", counting)
    return sizes


def test_an_unchanged_forged_header_is_hashed_once(tmp_path: Path, hashed: list[int]) -> None:
    disk = _disk(tmp_path)
    _forge(disk)
    reader = wire.ResultReader(disk)
    for _ in range(200):  # two seconds of polls every 10 ms
        assert reader.poll() == (None, True)
    assert reader.hashes == 1 and len(hashed) == 1
    assert reader.hashed_bytes == 2 + PAYLOAD


def test_a_guest_rewriting_forged_headers_is_a_protocol_error(tmp_path: Path, hashed: list[int]) -> None:
    disk = _disk(tmp_path)
    reader = wire.ResultReader(disk)
    for salt in range(wire.MAX_RESULT_HASHES):
        _forge(disk, salt)
        assert reader.poll() == (None, True)
    _forge(disk, 999)
    with pytest.raises(wire.WireError, match="protocol error"):
        reader.poll()
    assert len(hashed) == reader.hashes == wire.MAX_RESULT_HASHES
    assert reader.hashed_bytes <= wire.MAX_RESULT_HASHES * (2 + PAYLOAD)


def test_the_bytes_budget_holds_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_RESULT_HASH_BYTES", 3 * PAYLOAD)
    disk = _disk(tmp_path)
    reader = wire.ResultReader(disk)
    for salt in range(3):
        _forge(disk, salt)
        if salt < 2:
            assert reader.poll() == (None, True)
    with pytest.raises(wire.WireError):
        reader.poll()
    assert reader.hashed_bytes <= 3 * PAYLOAD


def test_positive_control_the_honest_result_after_a_forged_header_is_read(tmp_path: Path) -> None:
    disk = _disk(tmp_path)
    reader = wire.ResultReader(disk)
    _forge(disk)
    assert reader.poll() == (None, True)
    assert reader.poll() == (None, True)
    _honest(disk, {"nonce": "n"}, [b"out", b"err"])
    guest, mismatch = reader.poll()
    assert guest is not None and not mismatch
    assert guest.record["nonce"] == "n" and guest.blob(0, 10) == b"out"
    assert reader.hashes == 2


def test_waiting_for_a_guest_that_keeps_forging_ends_with_a_protocol_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end through GuestVM.wait (no VM: the output disk is written by a thread standing in for a
    root guest that changes its forged header every few milliseconds)."""
    image = ImageInfo("r", "f" * 64, tmp_path / "image", "6.1", "now", 0)
    guest = vm.GuestVM(image, "qemu", run_id="forger", workdir=tmp_path / "run")
    guest.workdir.mkdir(parents=True)
    wire.create_output_disk(guest.out_disk, DISK)
    monkeypatch.setattr(vm, "RESTORE_READY_TIMEOUT", 30.0)
    monkeypatch.setattr(vm, "MISMATCH_BACKOFF_MAX", 0.01)  # the budget, not the back-off, is under test
    monkeypatch.setattr(guest, "is_active", lambda: True)
    guest.restored, guest.launched = True, time.monotonic()
    stop = threading.Event()

    def forger() -> None:
        salt = 0
        while not stop.is_set():
            salt += 1
            _forge(guest.out_disk, salt)
            time.sleep(0.002)

    thread = threading.Thread(target=forger, daemon=True)
    thread.start()
    began = time.monotonic()
    try:
        with pytest.raises(wire.WireError, match="protocol error"):
            guest.wait(RunLimits())
    finally:
        stop.set()
        thread.join()
    assert time.monotonic() - began < 20  # ended by the budget, long before the 30 s timeout
