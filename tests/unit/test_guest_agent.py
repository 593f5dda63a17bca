"""The host and the guest agent speak the same disk protocol: the real agent, loaded from the image
recipe, reads a job disk written by `wire.py`, and what it writes back `wire.py` and `output` accept.
No VM: the agent's disk paths are pointed at files."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

from backend.sandbox import wire
from backend.sandbox.models import MAX_ACTIONS_BYTES, MAX_OUTPUT_BYTES, RunLimits, VmInfo
from backend.sandbox.output import STDOUT_MARKER, guest_limits, interpret
from backend.settings import get_settings

PROTOCOL_CONSTANTS = [
    "BLOCK",
    "JOB_MAGIC",
    "WARM_MAGIC",
    "READY_MAGIC",
    "RESULT_MAGIC",
    "RESULT_HEADER_OFFSET",
    "RESULT_JSON_OFFSET",
    "RESULT_JSON_MAX",
    "RESULT_PAYLOAD_OFFSET",
]


@pytest.fixture
def disks(guest_agent: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A job disk and an output disk as files, wired in as the agent's /dev/vdb and /dev/vdc."""
    job, out = tmp_path / "job.img", tmp_path / "out.img"
    with open(job, "wb") as fh:
        fh.truncate(4 * 1024 * 1024)
    wire.create_output_disk(out, 8 * 1024 * 1024)
    try:
        os.close(os.open(job, os.O_RDONLY | os.O_DIRECT))
    except OSError as exc:  # a filesystem without O_DIRECT (older tmpfs): read through the cache
        if exc.errno != errno.EINVAL:
            raise
        monkeypatch.setattr(os, "O_DIRECT", 0)
    monkeypatch.setattr(guest_agent, "JOB_DEV", str(job))
    monkeypatch.setattr(guest_agent, "OUT_DEV", str(out))
    return job, out


@pytest.mark.parametrize("name", PROTOCOL_CONSTANTS)
def test_the_agent_and_the_host_agree_on_every_protocol_constant(guest_agent: ModuleType, name: str) -> None:
    assert getattr(guest_agent, name) == getattr(wire, name)


def test_a_job_written_by_the_host_is_read_whole_by_the_agent(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    job_disk, _ = disks
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "sales.csv").write_bytes(b"region,amount\nnorth,3\n")
    (inputs / "sub" / "note.txt").write_bytes("naïve\n".encode())
    record = {"run_id": "r1", "nonce": "n1", "code": "print(1)", "limits": guest_limits(RunLimits())}
    wire.write_job_disk(job_disk, 4 * 1024 * 1024, record, wire.input_files(inputs), in_place=True)

    job, payload, _detected = guest_agent.wait_for_job()

    assert {k: job[k] for k in record} == record
    files = {item["name"]: payload[item["offset"] : item["offset"] + item["size"]] for item in job["inputs"]}
    assert files == {"sales.csv": b"region,amount\nnorth,3\n", "sub/note.txt": "naïve\n".encode()}
    assert job["limits"]["stdout_cap"] == get_settings().stdout_cap_bytes
    assert job["limits"]["max_total_bytes"] == MAX_OUTPUT_BYTES


def test_ready_and_warm_blocks_written_by_the_agent_are_read_by_the_host(
    guest_agent: ModuleType, disks: tuple[Path, Path]
) -> None:
    _, out = disks
    guest_agent.write_block0(guest_agent.WARM_MAGIC, {"interfaces": ["lo"], "warm_ms": 1})
    assert wire.read_block0(out, wire.WARM_MAGIC) == {"interfaces": ["lo"], "warm_ms": 1}
    guest_agent.write_block0(guest_agent.READY_MAGIC, {"nonce": "n1", "interfaces": ["lo"]})
    assert wire.read_block0(out, wire.READY_MAGIC) == {"nonce": "n1", "interfaces": ["lo"]}
    assert wire.read_block0(out, wire.WARM_MAGIC) is None


def test_a_result_written_by_the_agent_becomes_the_run_result_on_the_host(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = disks
    cap = get_settings().stdout_cap_bytes
    stdout = guest_agent.Capture(cap)
    stdout.feed(b"x" * (cap + 10))  # more than the cap: the agent keeps the first `cap` bytes
    stderr = guest_agent.Capture(cap)
    stderr.feed(b"warning\n")
    chart = b"\x89PNG fake"
    actions = json.dumps([{"type": "update", "id": 1}]).encode()
    record = {
        "nonce": "n1",
        "exit_code": 0,
        "timed_out": False,
        "oom_kills": 0,
        "stdout_truncated": stdout.truncated,
        "stderr_truncated": stderr.truncated,
        "actions_present": True,
        "files": [{"name": "chart.png", "size": len(chart), "sha256": hashlib.sha256(chart).hexdigest()}],
        "rejected": [{"name": "link", "reason": "symbolic link (not collected)"}],
        "interfaces": ["lo"],
        "timings_ms": {"ready": 1.0, "execute": 2.0, "collect": 3.0},
    }
    guest_agent.write_result(record, [bytes(stdout.data), bytes(stderr.data), actions, chart])

    guest = wire.read_result(out)
    assert guest is not None
    assert guest.record["nonce"] == "n1"
    assert guest.blob(2, MAX_ACTIONS_BYTES) == actions
    result = interpret(guest, "n1", VmInfo(), tmp_path / "out", read_actions=True)
    assert result.status == "succeeded" and result.exit_code == 0
    assert result.stdout == "x" * cap + STDOUT_MARKER.format(cap=cap)
    assert result.stdout_truncated is True
    assert result.stderr == "warning\n"
    assert result.actions == [{"type": "update", "id": 1}]
    assert [(f.name, f.size) for f in result.files] == [("chart.png", len(chart))]
    assert (tmp_path / "out" / "chart.png").read_bytes() == chart
    assert [(r.name, r.reason) for r in result.rejected_files] == [("link", "symbolic link (not collected)")]
    assert result.vm.guest_interfaces == ["lo"]


def test_the_agents_last_words_are_an_error_result_on_the_host(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = disks
    guest_agent.write_result({"agent_error": "OSError('mount failed')", "nonce": "n1"}, [])
    guest = wire.read_result(out)
    result = interpret(guest, "n1", VmInfo(), tmp_path / "out", read_actions=True)
    assert result.status == "error"
    assert result.error == "guest agent failed: OSError('mount failed')"


def test_a_result_for_another_job_is_refused(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = disks
    guest_agent.write_result({"nonce": "old", "exit_code": 0}, [b"", b"", b""])
    result = interpret(wire.read_result(out), "n1", VmInfo(), tmp_path / "out", read_actions=True)
    assert result.status == "error" and "another job" in result.error
