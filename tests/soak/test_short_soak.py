"""The fault soak, short, in the suite: a fixed seed, the embedded deployment, about two minutes. The API
and its worker are killed and the data disk filled while the workload runs; every invariant must hold
(`backend/soak/invariants.py`; their failing cases are in test_invariants.py). libvirtd is left alone here:
it is the machine's, and another checkout's suite may be using it (`cleanroom soak` restarts it)."""

from __future__ import annotations

import json

import pytest

from backend.soak.runner import soak

pytestmark = [pytest.mark.vm, pytest.mark.timeout(900)]


def test_a_short_soak_keeps_every_invariant() -> None:
    summary = soak(
        seconds=75,
        seed=7,
        faults=["kill_api", "kill_worker", "fill_disk"],
        fault_every=15,
        settle_seconds=420,
        progress=lambda line: None,
    )
    shown = json.dumps(summary, indent=1, default=str)[:6000]
    assert summary["violations"] == [], shown
    assert summary["faults_total"] >= 2, shown  # the nemesis struck
    assert summary["runs"] >= 3, shown  # and the workload worked meanwhile
    ended = sum(n for status, n in summary["runs_by_status"].items() if status != "awaiting_approval")
    assert ended >= 2, shown
