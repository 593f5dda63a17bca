"""Policies the sandbox decides once: the printed-output cap and its marker, the actions cap; and what a
GuestVM does with a hostile guest's console and forged result header (no VM needed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from backend.sandbox import actions_cap, cap_stream, vm, wire
from backend.sandbox.image import ImageInfo
from backend.sandbox.models import RunLimits
from backend.sandbox.output import STDERR_MARKER, STDOUT_MARKER, parse_actions
from backend.settings import get_settings


def test_output_under_the_cap_is_kept_as_is() -> None:
    assert cap_stream(b"hello\n", 100) == ("hello\n", False)


def test_output_over_the_cap_is_cut_once_with_one_marker() -> None:
    text, truncated = cap_stream(b"x" * 150, 100)
    assert truncated is True
    assert text == "x" * 100 + STDOUT_MARKER.format(cap=100)
    assert text.count("truncated") == 1


def test_the_agents_truncation_flag_adds_the_marker_for_stderr() -> None:
    text, truncated = cap_stream(b"e" * 100, 100, truncated=True, marker=STDERR_MARKER)
    assert truncated and text.endswith(STDERR_MARKER.format(cap=100))


def test_invalid_utf8_never_grows_the_text_past_the_cap() -> None:
    # Each invalid byte decodes to U+FFFD, three bytes: 100 bytes in would be 300 bytes of text.
    text, truncated = cap_stream(b"\xff" * 100, 100)
    body = text.removesuffix(STDOUT_MARKER.format(cap=100))
    assert truncated is True
    assert len(body.encode()) <= 100


def test_more_actions_than_the_cap_reject_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(get_settings(), "max_actions_per_run", 3)
    assert actions_cap() == 3
    assert parse_actions(b'[{"a": 1}, {"a": 2}, {"a": 3}]')[0] == [{"a": 1}, {"a": 2}, {"a": 3}]
    actions, problem = parse_actions(b'[{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}]')
    assert actions is None  # nothing kept partially
    assert problem == "actions.json proposes 4 actions; at most 3 are allowed"


def _guest_vm(tmp_path: Path) -> vm.GuestVM:
    image = ImageInfo("r", "f" * 64, tmp_path / "image", "6.1", "now", 0)
    guest = vm.GuestVM(image, "qemu", run_id="unit", workdir=tmp_path / "run")
    guest.workdir.mkdir(parents=True)
    wire.create_output_disk(guest.out_disk, 4 * 1024 * 1024)
    return guest


def test_only_the_end_of_a_huge_console_log_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guest = _guest_vm(tmp_path)
    with open(guest.console_log, "wb") as fh:
        fh.write(b"early noise\n" * 1_000_000)
        fh.write(b"Kernel panic - not syncing: the end\n")
    reads: list[int] = []
    real_open = open

    class CountingFile:
        def __init__(self, fh):
            self._fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

        def read(self, n=-1):
            data = self._fh.read(n)
            reads.append(len(data))
            return data

        def __getattr__(self, name):
            return getattr(self._fh, name)

    monkeypatch.setattr("builtins.open", lambda *a, **k: CountingFile(real_open(*a, **k)))
    tail = guest.console_tail()
    assert tail.endswith("Kernel panic - not syncing: the end")
    assert len(tail) <= vm.CONSOLE_TAIL_CHARS
    assert sum(reads) <= 4 * vm.CONSOLE_TAIL_CHARS


def _forge_header(disk: Path) -> None:
    """A RESULT header claiming a large payload whose digest never matches."""
    import struct

    with open(disk, "r+b") as fh:
        fh.seek(wire.RESULT_HEADER_OFFSET)
        fh.write(wire.RESULT_MAGIC + struct.pack(">QQ", 2, 1024 * 1024) + b"\0" * 32)


def _result_reads_while_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, forged: bool) -> int:
    guest = _guest_vm(tmp_path)
    if forged:
        _forge_header(guest.out_disk)
    calls = []
    real_poll = wire.ResultReader.poll
    monkeypatch.setattr(
        wire.ResultReader, "poll", lambda reader: calls.append(reader.path) or real_poll(reader)
    )
    monkeypatch.setattr(vm, "RESTORE_READY_TIMEOUT", 0.6)
    monkeypatch.setattr(guest, "is_active", lambda: True)
    guest.restored, guest.launched = True, time.monotonic()
    with pytest.raises(vm.GuestFailure, match="never became ready"):
        guest.wait(RunLimits())
    return len(calls)


def test_a_forged_result_header_makes_the_host_back_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest_polls = _result_reads_while_waiting(tmp_path / "a", monkeypatch, forged=False)
    forged_polls = _result_reads_while_waiting(tmp_path / "b", monkeypatch, forged=True)
    assert honest_polls > 20  # positive control: an empty disk is polled every 10 ms
    assert forged_polls <= 8  # a header whose digest fails is re-hashed ever more rarely


def _result_with_broken_actions(tmp_path: Path) -> wire.GuestResult:
    """A guest that says it wrote actions.json but laid the blob out past the end of its payload."""
    payload = tmp_path / "payload"
    payload.write_bytes(b"42\n")
    record = {
        "nonce": "n",
        "exit_code": 0,
        "actions_present": True,
        "blobs": [{"offset": 0, "size": 3}, {"offset": 3, "size": 0}, {"offset": 0, "size": 1 << 40}],
    }
    return wire.GuestResult(record=record, payload_offset=0, payload_len=3, path=payload)


def test_a_read_step_never_touches_its_actions_blob(tmp_path: Path) -> None:
    """Capability `read`: the actions are discarded unread, so not even a broken blob can fail the run.
    Control: with `propose_writes` the same result is read, and its broken blob is caught."""
    from backend.sandbox.models import VmInfo
    from backend.sandbox.output import interpret

    result = interpret(_result_with_broken_actions(tmp_path), "n", VmInfo(), tmp_path / "out", False)
    assert result.status == "succeeded" and result.actions_discarded and result.actions is None
    assert result.stdout == "42\n"
    with pytest.raises(wire.WireError, match="blob 2 out of bounds"):
        interpret(_result_with_broken_actions(tmp_path), "n", VmInfo(), tmp_path / "out2", True)
