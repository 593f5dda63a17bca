"""`cleanroom bench` runs every suite: one that cannot run on this host (no PostgreSQL for `workers`, say)
is reported with its error and the others still print."""

from __future__ import annotations

import json

from backend import benches


def test_a_suite_that_fails_is_reported_and_the_others_still_run(monkeypatch, capsys) -> None:
    def broken() -> dict:
        raise RuntimeError("CLEANROOM_BENCH_POSTGRES_URL is not set")

    monkeypatch.setitem(benches.SUITES, "broken", broken)
    monkeypatch.setitem(benches.SUITES, "fine", lambda: {"p50": 1.0})
    results = benches.run_suites(["broken", "fine"], as_json=True)
    assert results == {
        "broken": {"error": "RuntimeError: CLEANROOM_BENCH_POSTGRES_URL is not set"},
        "fine": {"p50": 1.0},
    }
    assert json.loads(capsys.readouterr().out) == results  # one JSON object, whole


def test_control_a_suite_that_works_is_reported_as_it_returned(monkeypatch) -> None:
    monkeypatch.setitem(benches.SUITES, "fine", lambda: {"p50": 2.0})
    assert benches.run_suites(["fine"], as_json=False) == {"fine": {"p50": 2.0}}
