"""A console started by `serve` ends when `serve` is gone, even after a kill -9 (console/watch.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The middle process plays `serve`: it starts the "console" (a process that calls leave_with_parent with its
# parent's pid, as console/__main__.py does) and prints its pid, then waits to be killed.
MIDDLE = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
child.wait()
"""
CONSOLE = """
import os, time
from console.watch import leave_with_parent
leave_with_parent(str(os.getppid()))
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_console_ends_when_serve_is_killed_and_lives_while_serve_does() -> None:
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, CONSOLE], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    console = int(middle.stdout.readline())
    try:
        # control: while `serve` lives, the console keeps serving (the watch does not end it early)
        assert not _wait_gone(console, 3.0)
        os.kill(middle.pid, signal.SIGKILL)
        middle.wait()
        assert _wait_gone(console, 10.0), "the console outlived the serve that started it"
    finally:
        if _alive(console):
            os.kill(console, signal.SIGKILL)
