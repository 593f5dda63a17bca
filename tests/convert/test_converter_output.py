"""What a converter hands back, and what it leaves behind, are bounded.

* Its answer is read with a bound (`convert_max_output_bytes`): a converter that streams without end is killed
  once it passes the bound, and the file is not staged. Positive control: the same file with a bound just
  above its answer converts.
* Whatever it starts dies with the conversion: the converter runs as pid 1's child in its own pid namespace,
  so a daemon it double-forks (a new session, reparented) is gone when the conversion ends. Positive control:
  the same converter without bubblewrap leaves its daemon running. This is what bounds a fork bomb's lifetime;
  RLIMIT_NPROC only caps the converter user's processes host-wide (sized for every conversion at once)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from backend.convert import convert
from backend.convert import isolated as converter_child
from backend.convert.isolated import convert_isolated, to_json

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="the converter sandbox needs a root service and bwrap (Debian package bubblewrap)",
)

FLOOD = """
import sys
from backend.convert.isolated import enter_confinement
enter_confinement(1 << 30)
sys.stdin.buffer.read()
chunk = b"x" * (1 << 20)
while True:
    sys.stdout.buffer.write(chunk)
"""

# Answers like the real converter, after leaving a daemon behind: double-forked, in a session of its own.
LEAVER = """
import json, os, subprocess, sys
from backend.convert.model import ConvertLimits
from backend.convert.service import convert
from backend.convert.isolated import enter_confinement, to_json
header = json.loads(sys.stdin.buffer.readline())
enter_confinement(1 << 30)
if os.fork() == 0:
    os.setsid()
    subprocess.Popen(["sleep", sys.argv[1]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    os._exit(0)
os.wait()
converted = convert(sys.stdin.buffer.read(), header["filename"], limits=ConvertLimits(**header["limits"]))
sys.stdout.buffer.write(to_json(converted))
"""

CSV = b"id,name,amount\n" + b"".join(b"%d,customer %d,%d.50\n" % (i, i, i * 3) for i in range(2000))


def use_converter(monkeypatch, script: list[str], *, bwrap: bool = True) -> None:
    """Conversions start `script` (a hostile converter) in place of the real one, confined as usual."""
    real = converter_child.spawn_confined

    def spawn(argv, workdir, bwrap=True, _wanted=bwrap):
        return real([sys.executable, "-c", *script], workdir, bwrap=_wanted)

    monkeypatch.setattr(converter_child, "spawn_confined", spawn)


def processes_running(token: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in cmdline.split(b"\0") and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_a_converter_streaming_without_end_is_cut_off_and_killed(monkeypatch) -> None:
    use_converter(monkeypatch, [FLOOD])
    began = time.monotonic()
    converted = convert_isolated(CSV, "t.csv", max_output_bytes=8 * 1024**2)
    assert converted.error is not None and "larger than the 8 MB" in converted.error
    assert converted.tables == [] and converted.text is None
    assert time.monotonic() - began < 20  # cut off at the bound, not at the 40 s wall-clock kill


def test_positive_control_an_answer_within_the_bound_converts() -> None:
    size = len(to_json(convert(CSV, "t.csv")))
    converted = convert_isolated(CSV, "t.csv", max_output_bytes=size + 64)  # elapsed_ms may gain digits
    assert converted.error is None and len(converted.tables[0].rows) == 2000
    refused = convert_isolated(CSV, "t.csv", max_output_bytes=size // 2)
    assert refused.error is not None and "larger than" in refused.error


def test_the_bound_defaults_to_the_setting_and_holds_a_large_sheet() -> None:
    """~17 bytes a cell (measured on a 500,000-cell CSV), so the 5M-cell limit is ~90 MB of answer."""
    from backend.settings import get_settings

    per_cell = len(to_json(convert(CSV, "t.csv"))) / (2000 * 3)
    assert get_settings().convert_max_output_bytes >= 2 * per_cell * get_settings().convert_max_cells


def test_a_daemon_a_converter_leaves_behind_dies_with_the_conversion(monkeypatch) -> None:
    token = f"600.{uuid.uuid4().int % 10**9}"  # `sleep 600.<n>`: this test's own daemon, no one else's
    use_converter(monkeypatch, [LEAVER, token])
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert converted.error is None and converted.tables[0].rows == [["1", "2"]]  # it did answer
    # the namespace's end SIGKILLs what is left in it; the kernel finishes those exits on its own time (on a
    # loaded machine, some milliseconds after bwrap returned), so wait for them to be gone, never longer than
    # the control below waits to see its daemon alive
    deadline = time.monotonic() + 10
    while (left := processes_running(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []


def test_positive_control_without_the_pid_namespace_the_daemon_survives(monkeypatch) -> None:
    token = f"600.{uuid.uuid4().int % 10**9}"
    use_converter(monkeypatch, [LEAVER, token], bwrap=False)
    try:
        converted = convert_isolated(b"a,b\n1,2\n", "t.csv", bwrap=False)
        assert converted.error is None
        deadline = time.monotonic() + 10
        while not (left := processes_running(token)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(left) == 1
    finally:
        for pid in processes_running(token):
            os.kill(pid, signal.SIGKILL)
