"""A served API process sets its garbage collector once it has started (backend/heap.py, issue 30): what exists then
is frozen out of full collections and the youngest generation is collected less often. At a thousand waiting
assistants full collections of about 150 ms came every six seconds, and a fifth of the slowest twentieth of
proposals sat inside one (docs/scale.md, item 15). The collector's state is its process's, so each app starts
in a process of its own; the control, an app made as the tests make theirs, leaves the collector as CPython
sets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from backend import heap
from backend.settings import REPO_ROOT

STARTED = """
import gc, json
from litestar.testing import TestClient
from backend.app import create_app

app = create_app(run_hooks=False, pool=False, settle_heap={settle})
before = gc.get_freeze_count()
with TestClient(app):
    print(json.dumps({{"before": before, "frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}}))
"""


def _started(tmp_path: Path, settle: bool) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")}
    env["CLEANROOM_DATA_DIR"] = str(tmp_path)  # SQLite in it
    done = subprocess.run(
        [sys.executable, "-c", STARTED.format(settle=settle)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_served_app_freezes_its_heap_and_collects_the_young_less_often_once_started(tmp_path) -> None:
    state = _started(tmp_path, settle=True)
    assert state["before"] == 0  # nothing frozen until it has started
    assert state["frozen"] > 10_000  # modules, routes, schemas: out of every full collection's walk
    assert state["young"] == heap.YOUNG > 700


def test_control_an_app_made_without_it_keeps_the_collector_as_cpython_sets_it(tmp_path) -> None:
    state = _started(tmp_path, settle=False)
    assert state == {"before": 0, "frozen": 0, "young": 700}
