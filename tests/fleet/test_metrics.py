"""GET /metrics: what the database holds, in Prometheus' text format, for the metrics token only (a loopback
client too: behind a same-host proxy everyone is loopback, and the queue is counted per company).

Runs are proposed through the API (one approved by a person), then their statuses, times and results are set
directly: this is about counting, no VM starts. The positive control that the numbers are read and not fixed:
a run moved from queued to succeeded changes both the status gauge and its company's queue depth. The histograms
are cumulative: scrapes around a run's end (`finish`, as the worker ends a run) never see a bucket go down, a
process started later scrapes the same numbers, and `went_down`, which checks that, is itself checked on hand-made
scrapes and on a real one after a finished run is taken out of the database.

Requests go through httpx's ASGI transport, where the client's address can be chosen (Litestar's test client
always calls itself `testclient`, which is not a loopback address).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from backend import metrics
from backend.execution.execute import finish
from backend.fleet.tables import WorkerHost
from backend.runs.tables import Run, RunStatus
from backend.settings import get_settings
from backend.tenancy.tables import Company
from tests.support.http import approve_as, token_for
from tests.support.metrics import (
    DATABASE_FAMILIES,
    LOOPBACK,
    METRICS_TOKEN,
    Samples,
    _result,
    propose,
    samples_of,
    scrape_text,
    scraper,
    value,
)
from tests.support.runs import enable_code

REMOTE = ("203.0.113.7", 40000)


async def scrape(client, headers: dict[str, str] | None = None) -> Samples:
    return samples_of(await scrape_text(client, headers))


def went_down(earlier: str, later: str, families: tuple[str, ...] | None = DATABASE_FAMILIES) -> list[str]:
    """Every counter or histogram sample (bucket, count, sum) of `earlier` that `later` lowers or lacks: what
    Prometheus would take for a restart of the process. Of the database families unless `families` says (None:
    every family)."""
    before = samples_of(earlier, ("counter", "histogram"), families)
    after = samples_of(later, ("counter", "histogram"), families)
    return [
        f"{name}{dict(labels)}: {value} -> {after.get((name, labels))}"
        for (name, labels), value in sorted(before.items())
        if after.get((name, labels), float("-inf")) < value
    ]


async def company_id(name: str) -> int:
    return (await Company.select(Company.id).where(Company.name == name).first())["id"]


@pytest.fixture(autouse=True)
def metrics_token(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Metrics are served only with a token: every test here runs with one set (one test unsets it)."""
    monkeypatch.setenv("CLEANROOM_METRICS_TOKEN", METRICS_TOKEN)
    get_settings.cache_clear()
    assert get_settings().metrics_token == METRICS_TOKEN
    yield METRICS_TOKEN
    monkeypatch.delenv("CLEANROOM_METRICS_TOKEN", raising=False)
    get_settings.cache_clear()


async def test_runs_by_status_and_queue_depth_follow_the_database(client) -> None:
    await enable_code()
    await enable_code("Globex")
    acme, globex = str(await company_id("Acme Analytics")), str(await company_id("Globex"))
    alice = await token_for(client, "alice@acme.example")
    gina = await token_for(client, "gina@globex.example")

    before = await scrape(client)  # the demo seed holds runs of its own
    for status in RunStatus:  # every status, zeros included
        assert value(before, "cleanroom_runs", status=status.value) is not None, status

    def changed(samples: Samples, name: str, **labels: str) -> float:
        return value(samples, name, **labels) - value(before, name, **labels)

    approved = await propose(client, alice)
    assert (await approve_as(client, "alice@acme.example", approved)).status_code == 200
    client.cookies.clear()
    moved = await propose(client, alice, RunStatus.queued)
    await propose(client, alice)  # stays awaiting approval
    await propose(client, gina, RunStatus.queued)
    await propose(client, gina, RunStatus.running)

    samples = await scrape(client)
    assert changed(samples, "cleanroom_runs", status="queued") == 3
    assert changed(samples, "cleanroom_runs", status="awaiting_approval") == 1
    assert changed(samples, "cleanroom_runs", status="running") == 1
    assert changed(samples, "cleanroom_runs", status="succeeded") == 0
    assert changed(samples, "cleanroom_queue_depth", company=acme) == 2
    assert changed(samples, "cleanroom_queue_depth", company=globex) == 1
    queued = await Run.count().where(Run.status == RunStatus.queued)
    assert value(samples, "cleanroom_runs", status="queued") == queued
    assert sum(v for (name, _), v in samples.items() if name == "cleanroom_runs") == await Run.count()

    await Run.update({Run.status: RunStatus.succeeded}).where(Run.id == moved)
    after = await scrape(client)
    assert changed(after, "cleanroom_runs", status="queued") == 2
    assert changed(after, "cleanroom_runs", status="succeeded") == 1
    assert changed(after, "cleanroom_queue_depth", company=acme) == 1
    assert changed(after, "cleanroom_queue_depth", company=globex) == 1


async def test_the_histograms_count_every_finished_run_in_its_bucket(client, monkeypatch) -> None:
    monkeypatch.setattr(metrics, "PAGE", 2)  # the first scrape reads the finished runs in more than one page
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    now = datetime.now(UTC)

    async def finished(status: str, ago: timedelta, seconds: float | None, start_ms: float | None) -> None:
        end = now - ago
        started = None if seconds is None else end - timedelta(seconds=seconds)
        await propose(client, alice, status, started_at=started, finished_at=end, result=_result(start_ms))

    await finished("succeeded", timedelta(minutes=5), 3.0, 800.0)  # 3 s in le=5; VM 0.8 s in le=1
    await finished("failed", timedelta(hours=23), 45.0, 2500.0)  # 45 s in le=60; VM 2.5 s in le=5
    await finished("cancelled", timedelta(minutes=1), None, None)  # never started: in neither
    await finished("succeeded", timedelta(days=30), 1.0, 100.0)  # long ago: counted all the same
    await propose(client, alice, RunStatus.running, started_at=now - timedelta(seconds=20))  # not finished

    samples = await scrape(client)  # the demo seed has no finished run
    vm = "cleanroom_vm_start_seconds"
    assert value(samples, f"{vm}_count") == 3
    assert value(samples, f"{vm}_sum") == pytest.approx(3.4)
    expected_vm = {"0.1": 1, "0.25": 1, "0.5": 1, "1.0": 2, "2.0": 2, "5.0": 3, "300.0": 3, "+Inf": 3}
    for le, count in expected_vm.items():
        assert value(samples, f"{vm}_bucket", le=le) == count, le

    run = "cleanroom_run_duration_seconds"
    assert value(samples, f"{run}_count") == 3
    assert value(samples, f"{run}_sum") == pytest.approx(49.0)
    expected_run = {"0.5": 0, "1.0": 1, "2.0": 1, "5.0": 2, "10.0": 2, "30.0": 2, "60.0": 3, "+Inf": 3}
    for le, count in expected_run.items():
        assert value(samples, f"{run}_bucket", le=le) == count, le

    assert await scrape(client) == samples  # nothing finished since: each run counted once, not per scrape


async def test_counters_and_histograms_never_go_down_across_a_run(client) -> None:
    """Two scrapes around a run's end: every bucket, count and sum is at least what it was, and the run is in."""
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    now = datetime.now(UTC)
    await propose(client, alice, "succeeded", started_at=now - timedelta(days=2, seconds=4),
                  finished_at=now - timedelta(days=2), result=_result(300.0))  # fmt: skip
    first = await scrape_text(client)
    assert not went_down(first, first)

    run_id = await propose(
        client, alice, RunStatus.running, started_at=datetime.now(UTC) - timedelta(seconds=7)
    )
    await finish(run_id, RunStatus.succeeded, result=_result(1500.0))  # how every run after approval ends
    second = await scrape_text(client)
    assert not went_down(first, second)
    before, after = samples_of(first), samples_of(second)
    for name in ("cleanroom_vm_start_seconds_count", "cleanroom_run_duration_seconds_count"):
        assert value(after, name) == value(before, name) + 1, name
    assert value(after, "cleanroom_vm_start_seconds_bucket", le="2.0") == 2
    assert value(after, "cleanroom_run_duration_seconds_bucket", le="10.0") == 2

    # a finish committed late (its finished_at before the last scrape) still counts, once
    late = await propose(client, alice, "failed", started_at=now - timedelta(seconds=90),
                         finished_at=now - timedelta(seconds=30), result=_result(50.0))  # fmt: skip
    third = await scrape_text(client)
    assert not went_down(second, third)
    assert value(samples_of(third), "cleanroom_vm_start_seconds_bucket", le="0.1") == 1
    assert value(samples_of(third), "cleanroom_run_duration_seconds_count") == 3
    assert late and samples_of(await scrape_text(client)) == samples_of(third)


async def test_another_api_process_scrapes_the_same_cumulative_numbers(client) -> None:
    """A scraper behind a load balancer may meet a process that started after the runs finished: its first
    scrape reads the database from the beginning and gives the same buckets, so alternating between processes
    sees nothing go down. Positive control, on real scrapes: were a finished run to leave the database (the
    product never deletes one), the next new process would count it no more, and `went_down` names exactly that
    run's buckets, counts and sums."""
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    now = datetime.now(UTC)
    await propose(client, alice, "succeeded", started_at=now - timedelta(days=3, seconds=4),
                  finished_at=now - timedelta(days=3), result=_result(300.0))  # fmt: skip
    gone = await propose(client, alice, "failed", started_at=now - timedelta(minutes=2, seconds=40),
                         finished_at=now - timedelta(minutes=2), result=_result(3000.0))  # fmt: skip
    first = await scrape_text(client)
    assert value(samples_of(first), "cleanroom_run_duration_seconds_count") == 2

    client.app.state.metrics_finished_runs = metrics.FinishedRuns()  # what a process started now holds
    fresh = await scrape_text(client)
    assert not went_down(first, fresh) and not went_down(fresh, first)
    assert samples_of(fresh, ("histogram",)) == samples_of(first, ("histogram",))

    await Run.delete().where(Run.id == gone)
    client.app.state.metrics_finished_runs = metrics.FinishedRuns()
    lowered = went_down(fresh, await scrape_text(client))
    dropped = {line.split("{")[0] for line in lowered}
    assert dropped == {
        f"{name}_{part}" for name in ("cleanroom_vm_start_seconds", "cleanroom_run_duration_seconds")
        for part in ("bucket", "count", "sum")
    }  # fmt: skip
    assert "cleanroom_vm_start_seconds_bucket{'le': '5.0'}: 2.0 -> 1.0" in lowered  # 3 s: from le=5 up
    assert not any("'le': '2.0'" in line and "vm_start" in line for line in lowered)  # 0.3 s stays


def test_the_monotonicity_check_sees_a_bucket_go_down() -> None:
    """Positive control of `went_down` on hand-made scrapes: a lowered bucket, a missing sample and a lowered
    counter are found; a gauge going down is not a fault."""
    earlier = """# HELP cleanroom_runs Runs by status.
# TYPE cleanroom_runs gauge
cleanroom_runs{status="queued"} 5.0
# HELP jobs_total Jobs.
# TYPE jobs_total counter
jobs_total 4.0
# HELP d Durations.
# TYPE d histogram
d_bucket{le="1.0"} 2.0
d_bucket{le="5.0"} 3.0
d_bucket{le="+Inf"} 3.0
d_count 3.0
d_sum 4.5
"""
    assert went_down(earlier, earlier, None) == []
    grown = earlier.replace('d_bucket{le="+Inf"} 3.0', 'd_bucket{le="+Inf"} 4.0').replace(
        "d_count 3.0", "d_count 4.0"
    )
    assert went_down(earlier, grown.replace('status="queued"} 5.0', 'status="queued"} 1.0'), None) == []
    lowered = earlier.replace('d_bucket{le="1.0"} 2.0', 'd_bucket{le="1.0"} 1.0')
    assert went_down(earlier, lowered, None) == ["d_bucket{'le': '1.0'}: 2.0 -> 1.0"]
    assert went_down(earlier, earlier.replace("d_sum 4.5\n", ""), None) == ["d_sum{}: 4.5 -> None"]
    assert went_down(earlier, earlier.replace("jobs_total 4.0", "jobs_total 0.0"), None) == [
        "jobs_total{}: 4.0 -> 0.0"
    ]


async def test_a_worker_host_appears_with_its_capacity_and_heartbeat_age(client) -> None:
    before = await scrape(client)
    assert not [key for key in before if key[0].startswith("cleanroom_worker_")]

    now = datetime.now(UTC)
    await WorkerHost(
        host_id="hv-a",
        capacity=4,
        running=1,
        started_at=now - timedelta(hours=1),
        last_heartbeat=now - timedelta(seconds=30),
    ).save()
    await WorkerHost(
        host_id="hv-b",
        capacity=2,
        running=0,
        started_at=now - timedelta(hours=2),
        last_heartbeat=now - timedelta(minutes=10),
        lost_at=now - timedelta(minutes=9),
    ).save()

    samples = await scrape(client)
    assert value(samples, "cleanroom_worker_capacity", host="hv-a") == 4
    assert value(samples, "cleanroom_worker_running", host="hv-a") == 1
    assert value(samples, "cleanroom_worker_up", host="hv-a") == 1
    assert 30 <= value(samples, "cleanroom_worker_heartbeat_age_seconds", host="hv-a") < 90
    assert value(samples, "cleanroom_worker_capacity", host="hv-b") == 2
    assert value(samples, "cleanroom_worker_up", host="hv-b") == 0
    assert 600 <= value(samples, "cleanroom_worker_heartbeat_age_seconds", host="hv-b") < 660


@pytest.mark.sqlite  # who is served /metrics, decided before any query (the counts stay on both engines)
async def test_without_a_metrics_token_nobody_is_served_not_even_loopback(client, monkeypatch) -> None:
    """Behind a reverse proxy on the same host every client is loopback: loopback is no credential."""
    await scrape(client)  # positive control: with the token set and sent, served
    monkeypatch.delenv("CLEANROOM_METRICS_TOKEN")
    get_settings.cache_clear()
    assert get_settings().metrics_token is None
    for address in (LOOPBACK, ("::1", 40000), ("::ffff:127.0.0.1", 40000), REMOTE):
        async with scraper(client, address) as http:
            for headers in ({}, {"Authorization": f"Bearer {METRICS_TOKEN}"}):
                response = await http.get("/metrics", headers=headers)
                assert response.status_code == 403, (address, response.text)
                assert response.json()["error"] == "forbidden"
                assert "CLEANROOM_METRICS_TOKEN" in response.json()["detail"]
                assert "cleanroom_queue_depth" not in response.text
    response = await client.get("/metrics")  # the test client's own address is `testclient`
    assert response.status_code == 403


@pytest.mark.sqlite  # who is served /metrics, decided before any query (the counts stay on both engines)
async def test_with_a_metrics_token_only_that_token_is_served(client, metrics_token: str) -> None:
    assistant = await token_for(client, "alice@acme.example")
    refused = {
        "no token": {},
        "a wrong token": {"Authorization": "Bearer " + metrics_token[:-1] + "y"},
        "the assistant's API token": assistant,
        "another scheme": {"Authorization": "Basic " + metrics_token},
    }
    for address in (LOOPBACK, REMOTE):  # a loopback client needs the token too
        async with scraper(client, address) as http:
            for why, headers in refused.items():
                response = await http.get("/metrics", headers=headers)
                assert response.status_code == 401, (address, why, response.text)
                assert response.json()["error"] == "not_authenticated", why
            response = await http.get("/metrics", headers={"Authorization": f"Bearer {metrics_token}"})
            assert response.status_code == 200, (address, response.text)
            assert "cleanroom_runs" in response.text
