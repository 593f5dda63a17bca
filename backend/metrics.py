"""Prometheus metrics at `GET /metrics`: runs by status, the queue per company, VM start and run duration over
the last day, and the worker hosts. Every scrape reads the database afresh into a registry of its own;
nothing is counted in this process, so every API process answers the same.

Access: only `Authorization: Bearer <metrics_token>`, from any address, loopback included (behind a reverse
proxy on the same host every client looks local, and the queue is counted per company). Without a
`metrics_token` set, nobody is served: metrics are off.
"""

from __future__ import annotations

import hmac
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from litestar import Request, Response, get
from piccolo.query.functions.aggregate import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from backend.errors import Forbidden, NotAuthenticated
from backend.fleet.tables import WorkerHost
from backend.runs.tables import FINISHED, Run, RunStatus
from backend.settings import get_settings
from backend.tenancy.auth import SELF_AUTHENTICATED
from backend.tenancy.tables import Company

EXPOSITION_TYPE = "text/plain; version=0.0.4"  # Litestar appends "; charset=utf-8" to a text/ type
MEDIA_TYPE = f"{EXPOSITION_TYPE}; charset=utf-8"  # what a scraper receives
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)  # seconds
WINDOW = timedelta(hours=24)  # the histograms cover runs that finished this recently
MAX_FINISHED_ROWS = 10_000  # at most this many of them, newest first


@dataclass(frozen=True)
class Snapshot:
    """What one scrape read from the database."""

    runs_by_status: dict[str, int]
    queued_by_company: dict[int, int]
    vm_start_seconds: list[float]
    run_seconds: list[float]
    workers: list[dict[str, Any]]
    now: datetime


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _seconds_between(earlier: datetime, later: datetime) -> float:
    return max(0.0, (_aware(later) - _aware(earlier)).total_seconds())


def _vm_start_seconds(timings: Any) -> float | None:
    """`timings_ms.start` of a stored SandboxResult: measured by the host from the VM's launch (cold boot or
    restore) to the guest's READY, right before the user code starts. None when the run has none."""
    value = timings.get("start") if isinstance(timings, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return value / 1000


async def read_snapshot(now: datetime | None = None) -> Snapshot:
    """Counts are aggregated by the database; the histograms read a bounded window of finished runs."""
    now = now or datetime.now(UTC)
    by_status = {status.value: 0 for status in RunStatus}
    for row in await Run.select(Run.status, Count()).group_by(Run.status):
        by_status[row["status"]] = row["count"]

    queued = {row["id"]: 0 for row in await Company.select(Company.id)}
    for row in (
        await Run.select(Run.company, Count()).where(Run.status == RunStatus.queued).group_by(Run.company)
    ):
        queued[row["company"]] = row["count"]

    # only the result's timings leave the database, never its printed output
    finished = (
        await Run.select(
            Run.started_at,
            Run.finished_at,
            Run.result.arrow("timings_ms").as_alias("timings_ms"),
        )
        .where(Run.status.is_in(list(FINISHED)) & (Run.finished_at >= now - WINDOW))
        .order_by(Run.finished_at, ascending=False)
        .limit(MAX_FINISHED_ROWS)
        .output(load_json=True)
    )
    vm_start, durations = [], []
    for row in finished:
        seconds = _vm_start_seconds(row["timings_ms"])
        if seconds is not None:
            vm_start.append(seconds)
        if row["started_at"] and row["finished_at"]:
            durations.append(_seconds_between(row["started_at"], row["finished_at"]))

    workers = await WorkerHost.select(
        WorkerHost.host_id,
        WorkerHost.capacity,
        WorkerHost.running,
        WorkerHost.last_heartbeat,
        WorkerHost.lost_at,
    ).order_by(WorkerHost.host_id)
    return Snapshot(by_status, queued, vm_start, durations, workers, now)


def _histogram(name: str, documentation: str, values: Sequence[float]) -> HistogramMetricFamily:
    ordered = sorted(values)
    buckets = [(floatToGoString(bound), bisect_right(ordered, bound)) for bound in BUCKETS]
    buckets.append(("+Inf", len(ordered)))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=sum(ordered))


class SnapshotCollector(Collector):
    """Turns a Snapshot into metric families; it reads nothing itself."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        runs = GaugeMetricFamily("cleanroom_runs", "Runs by status.", labels=["status"])
        for status, count in sorted(s.runs_by_status.items()):
            runs.add_metric([status], count)
        yield runs

        queue = GaugeMetricFamily("cleanroom_queue_depth", "Queued runs per company.", labels=["company"])
        for company, count in sorted(s.queued_by_company.items()):
            queue.add_metric([str(company)], count)
        yield queue

        yield _histogram(
            "cleanroom_vm_start_seconds",
            "VM launch to guest ready (timings_ms.start) of runs finished in the last 24 h.",
            s.vm_start_seconds,
        )
        yield _histogram(
            "cleanroom_run_duration_seconds",
            "finished_at - started_at of runs finished in the last 24 h.",
            s.run_seconds,
        )

        labels = ["host"]
        capacity = GaugeMetricFamily("cleanroom_worker_capacity", "VMs a worker host offers.", labels=labels)
        running = GaugeMetricFamily("cleanroom_worker_running", "Runs a worker host holds.", labels=labels)
        age = GaugeMetricFamily(
            "cleanroom_worker_heartbeat_age_seconds",
            "Seconds since a worker host's last heartbeat.",
            labels=labels,
        )
        up = GaugeMetricFamily("cleanroom_worker_up", "1 unless the worker host is lost.", labels=labels)
        for worker in s.workers:
            host = [worker["host_id"]]
            capacity.add_metric(host, worker["capacity"])
            running.add_metric(host, worker["running"])
            age.add_metric(host, _seconds_between(worker["last_heartbeat"], s.now))
            up.add_metric(host, 0 if worker["lost_at"] else 1)
        yield from (capacity, running, age, up)


async def exposition() -> bytes:
    """The Prometheus text format of what the database holds now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(await read_snapshot()))
    return generate_latest(registry)


def check_access(request: Request) -> None:
    """The metrics token, whoever asks (401 otherwise); none set: metrics are off (403 for everyone)."""
    expected = get_settings().metrics_token
    if not expected:
        raise Forbidden("metrics are off: the operator sets CLEANROOM_METRICS_TOKEN to serve them")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise NotAuthenticated("send 'Authorization: Bearer <metrics token>'")


# SELF_AUTHENTICATED: the app's scope guard would read the metrics token as a personal API token (401)
@get("/metrics", media_type=EXPOSITION_TYPE, opt=SELF_AUTHENTICATED, include_in_schema=False)
async def metrics_endpoint(request: Request) -> Response[bytes]:
    """Prometheus metrics (text format 0.0.4), for a scraper holding the metrics token."""
    check_access(request)
    return Response(await exposition(), media_type=EXPOSITION_TYPE)
