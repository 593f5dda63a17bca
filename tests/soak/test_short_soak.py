"""The fault soak, short, in the suite: a fixed seed, a 25 s workload in each mode with a fault every 6 s
(embedded) or 4 s (fleet, whose faults take about 5 s each) on average: the same three to six faults the 40 s
window with one every 10 s gave, in less time. The API and its
worker (the fleet's hosts) are killed, the data disk filled and, in the fleet, the database's connections
cut while the workload runs; every invariant must hold (`backend/soak/invariants.py`; their failing cases are
in test_invariants.py). libvirtd and PostgreSQL are left running here: they are the machine's, and another
checkout's suite may be using them (`cleanroom soak` strikes them only when named; test_faults.py)."""

from __future__ import annotations

import json

import pytest

from backend.soak.runner import soak
from tests.support.databases import POSTGRES_URL

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]


def test_a_short_soak_keeps_every_invariant() -> None:
    summary = soak(
        seconds=25,
        seed=7,
        faults=["kill_api", "kill_worker", "fill_disk"],
        fault_every=6,
        settle_seconds=420,
        progress=lambda line: None,
    )
    _kept(summary)


@pytest.mark.postgres
def test_a_short_fleet_soak_keeps_every_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (scripts/test sets CLEANROOM_TEST_POSTGRES_URL)")
    monkeypatch.setenv("CLEANROOM_BENCH_POSTGRES_URL", POSTGRES_URL)
    summary = soak(
        seconds=25,
        seed=7,
        mode="fleet",
        faults=["kill_api", "kill_worker", "cut_database", "fill_disk"],
        fault_every=4,
        settle_seconds=420,
        progress=lambda line: None,
    )
    _kept(summary)


def _kept(summary: dict) -> None:
    shown = json.dumps(summary, indent=1, default=str)[:6000]
    assert summary["violations"] == [], shown
    assert summary["faults_total"] >= 2, shown  # the nemesis struck
    assert summary["runs"] >= 3, shown  # and the workload worked meanwhile
    ended = sum(n for status, n in summary["runs_by_status"].items() if status != "awaiting_approval")
    assert ended >= 2, shown
