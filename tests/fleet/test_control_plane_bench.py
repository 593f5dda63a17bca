"""`cleanroom bench control-plane` at a size the suite can afford: it must keep working (its figures are the
README's, read from a real run of the bench, never asserted here). What it must show at any size: runs are
proposed, approved by people, dispatched to simulated hosts and claimed by exactly one, a backlog of them
too; no request fails with a server error; the API process is measured. It runs with two API processes (`serve --processes 2`): runs
proposed and approved in either are dispatched by the one that leads, each claimed once."""

from __future__ import annotations

import pytest

from backend import sandbox
from backend.benches.control_plane import run_control_plane_bench
from tests.support.databases import POSTGRES_URL

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_the_control_plane_bench_runs_end_to_end_and_claims_each_run_once(_factories, monkeypatch) -> None:
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (scripts/test sets CLEANROOM_TEST_POSTGRES_URL)")
    monkeypatch.setenv("CLEANROOM_BENCH_POSTGRES_URL", POSTGRES_URL)
    monkeypatch.setenv("CLEANROOM_BENCH_CP_MCP_SHARE", "0.5")
    monkeypatch.setenv("CLEANROOM_BENCH_CP_ONE_AT_A_TIME", "3")
    # the hosts' quiet phase measures the API's heartbeat CPU, a figure of `cleanroom bench`'s: 1 s, not 5
    monkeypatch.setenv("CLEANROOM_BENCH_CP_QUIET_SECONDS", "1")
    real_run_code = sandbox.run_code
    report = run_control_plane_bench(
        assistants=4,
        hosts=3,
        seconds=8,
        template=_factories["postgres"].template(seeded=True),
        processes=2,
        backlog=6,
    )
    assert report["api_processes"] == 2  # the one-process path is every other fleet test's
    assert sandbox.run_code is real_run_code  # the canned VM was this bench's only
    assert report["client_failures"] == [], report
    assert all("5xx" not in route for route in report["routes_ms"].values()), report["routes_ms"]
    assert report["mcp_assistants"] == 2 and "MCP get_run(wait_seconds=30)" in report["routes_ms"], report
    assert report["counts"].get("proposed", 0) >= 4 and report["counts"].get("approved", 0) >= 1, report
    assert report["runs_claimed"] >= 1 and report["runs_with_more_than_one_job"] == 0, report
    # the backlog: twice the hosts' slots, so half of it is handed out only as results free slots
    backlog = report["backlog"]
    assert backlog["runs"] == backlog["ended"] == 6 and backlog["runs_with_more_than_one_job"] == 0, backlog
    # a canned result landed (the host agent sends every call, its signed result URL too, under /api/v1/)
    assert report["routes_ms"]["POST /api/v1/worker/runs/{id}/result"]["n"] >= 1, report
    one = report["api"]["cpu_ms_per_request_one_at_a_time"]  # and rejected: the later phases never saw them
    assert one["requests"] == 3 and one["POST /api/runs"] > 0 and one["GET /api/runs/{id}"] >= 0, one
    assert report["api"]["rss_mib_max"] > 0 and report["api"]["db_connections_max"] > 0, report
    in_api = report["routes_ms_in_api"]  # the API's own time (Server-Timing), never above what a client saw
    assert in_api["POST /api/runs"]["n"] == report["routes_ms"]["POST /api/runs"]["n"] > 0, in_api
    assert 0 < in_api["POST /api/runs"]["p50"] <= report["routes_ms"]["POST /api/runs"]["p50"], report
    lag = report["bench_loop_lag_ms"]  # the bench's own loop is measured beside what it times
    assert 0 <= lag["p50"] <= lag["p95"] <= lag["p99"] <= lag["max"], lag
