"""A served API process sets its garbage collector once it has started (backend/heap.py, issue 30): what exists then
is frozen out of full collections and the youngest generation is collected less often. At a thousand waiting
assistants full collections of about 150 ms came every six seconds, and a fifth of the slowest twentieth of
proposals sat inside one (docs/scale.md, item 15). The collector's state is its process's, so the apps start in
a process of the test's own; the control, an app made as the tests make theirs, leaves the collector as CPython
sets it, and is made first."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backend import heap
from backend.settings import REPO_ROOT

STARTED = """
import gc, json
from litestar.testing import TestClient
from backend.app import create_app

for settle in (False, True):  # the control first: nothing it does may be left for the settled app to find
    app = create_app(run_hooks=False, pool=False, settle_heap=settle)
    before = gc.get_freeze_count()
    with TestClient(app):
        print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}))
"""


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dict[str, int]]:
    """One process (importing the app is most of a start's cost) makes the control's app, then the settled one:
    the collector is the process's, and the control leaves it as CPython sets it (asserted below)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CLEANROOM_DATABASE_URL")}
    env["CLEANROOM_DATA_DIR"] = str(tmp_path_factory.mktemp("heap"))  # SQLite in it
    done = subprocess.run(
        [sys.executable, "-c", STARTED],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    control, settled = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    return {False: control, True: settled}


def test_a_served_app_freezes_its_heap_and_collects_the_young_less_often_once_started(started) -> None:
    state = started[True]
    assert state["before"] == 0  # nothing frozen until it has started
    assert state["frozen"] > 10_000  # modules, routes, schemas: out of every full collection's walk
    assert state["young"] == heap.YOUNG > 700


def test_control_an_app_made_without_it_keeps_the_collector_as_cpython_sets_it(started) -> None:
    state = started[False]
    assert state == {"before": 0, "frozen": 0, "young": 700}
