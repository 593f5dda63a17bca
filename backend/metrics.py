"""Prometheus metrics at `GET /metrics`: runs by status, the queue per company and its oldest wait, the oldest
run awaiting approval, the pools, the worker hosts and the last `audit verify` (gauges, read afresh from the
database and the data directory at every scrape), and VM start and run duration (histograms); then what the
processes count themselves: requests per route (Litestar's middleware), the product's counters
(backend/observe.py) and the process and GC collectors (`observe.process_registry`). The list: docs/observability.md.

The histograms are cumulative, as Prometheus expects of histograms and counters: they count every finished run the
database holds, and runs are never deleted nor their times changed once finished, so no scrape sees a bucket go
down, and every API process converges on the same numbers (a scraper behind a load balancer may meet any of
them). Each process reads a finished run once: its first scrape reads them all (in pages), later scrapes only
those finished since the one before, less a margin (SETTLE) for a finish committed late; the ids in that margin
are remembered so that none is counted twice.

Access: only `Authorization: Bearer <metrics_token>`, from any address, loopback included (behind a reverse
proxy on the same host every client looks local, and the queue is counted per company). Without a
`metrics_token` set, nobody is served: metrics are off.
"""

from __future__ import annotations

import asyncio
import hmac
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from litestar import Request, Response, get
from litestar.plugins.prometheus import PrometheusConfig, PrometheusMiddleware
from piccolo.query.functions.aggregate import Count, Min
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from backend import observe
from backend.audit import anchor
from backend.credits import service as credits
from backend.errors import Forbidden, NotAuthenticated
from backend.fleet.tables import WorkerHost
from backend.runs.stats import vm_start_seconds
from backend.runs.tables import FINISHED, Run, RunStatus
from backend.settings import get_settings
from backend.tenancy.auth import SELF_AUTHENTICATED
from backend.tenancy.tables import Company

EXPOSITION_TYPE = "text/plain; version=0.0.4"  # Litestar appends "; charset=utf-8" to a text/ type
MEDIA_TYPE = f"{EXPOSITION_TYPE}; charset=utf-8"  # what a scraper receives
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)  # seconds
SETTLE = timedelta(minutes=10)  # a finish committed up to this long after its finished_at is still counted
PAGE = 5_000  # finished runs read per query


@dataclass(frozen=True)
class Snapshot:
    """What one scrape read from the database."""

    runs_by_status: dict[str, int]
    queued_by_company: dict[int, int]
    workers: list[dict[str, Any]]
    now: datetime
    oldest_queued: dict[int, datetime] = field(default_factory=dict)  # per company, since its approval
    oldest_awaiting: dict[int, datetime] = field(default_factory=dict)  # per company, since its proposal
    pools: dict[int, tuple[int, float]] = field(default_factory=dict)  # per company: (pool, used) this period
    verified: dict[str, Any] | None = None  # the last `cleanroom audit verify` (backend/audit/anchor.py)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _seconds_between(earlier: datetime, later: datetime) -> float:
    return max(0.0, (_aware(later) - _aware(earlier)).total_seconds())


async def read_snapshot(now: datetime | None = None) -> Snapshot:
    """The gauges' figures, aggregated by the database."""
    now = now or datetime.now(UTC)
    by_status = {status.value: 0 for status in RunStatus}
    for row in await Run.select(Run.status, Count()).group_by(Run.status):
        by_status[row["status"]] = row["count"]

    queued = {row["id"]: 0 for row in await Company.select(Company.id)}
    for row in (
        await Run.select(Run.company, Count()).where(Run.status == RunStatus.queued).group_by(Run.company)
    ):
        queued[row["company"]] = row["count"]

    workers = await WorkerHost.select(
        WorkerHost.host_id,
        WorkerHost.capacity,
        WorkerHost.running,
        WorkerHost.last_heartbeat,
        WorkerHost.lost_at,
    ).order_by(WorkerHost.host_id)
    return Snapshot(
        by_status,
        queued,
        workers,
        now,
        oldest_queued=await _oldest(Run.approved_at, RunStatus.queued),
        oldest_awaiting=await _oldest(Run.created_at, RunStatus.awaiting_approval),
        pools=await credits.pools_and_used(),
        verified=await asyncio.to_thread(anchor.last_verified),
    )


async def _oldest(since: Any, status: RunStatus) -> dict[int, datetime]:
    """Per company, the earliest `since` of its runs in `status` (companies with none are left out)."""
    rows = (
        await Run.select(Run.company, Min(since).as_alias("oldest"))
        .where(Run.status == status)
        .group_by(Run.company)
    )
    return {row["company"]: _moment(row["oldest"]) for row in rows if row["oldest"] is not None}


def _moment(value: datetime | str) -> datetime:
    """An aggregate's timestamp: SQLite hands it back as the stored text."""
    return _aware(value if isinstance(value, datetime) else datetime.fromisoformat(value))


class Histogram:
    """Cumulative counts per bucket of BUCKETS (the last one +Inf), and the sum of what was observed."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(BUCKETS, value)] += 1  # the first bucket whose bound is >= value
        self.sum += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        buckets, total = [], 0
        for bound, count in zip((*map(floatToGoString, BUCKETS), "+Inf"), self.counts, strict=True):
            total += count
            buckets.append((bound, total))
        return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=self.sum)


class FinishedRuns:
    """VM start and run duration of every finished run in the database, each run counted once."""

    def __init__(self) -> None:
        self.vm_start = Histogram()
        self.duration = Histogram()
        self.read_until: datetime | None = None  # the last catch-up saw every finish committed before this
        self.recent: dict[int, datetime] = {}  # counted runs that finished within SETTLE of read_until
        self.lock = asyncio.Lock()  # concurrent scrapes: one reads, the next finds it done

    async def catch_up(self, now: datetime | None = None) -> None:
        async with self.lock:
            now = now or datetime.now(UTC)
            where = Run.status.is_in(list(FINISHED)) & Run.finished_at.is_not_null()
            if self.read_until is not None:
                where &= Run.finished_at >= self.read_until - SETTLE
            after = 0
            while True:
                # only the result's timings leave the database, never its printed output
                rows = (
                    await Run.select(
                        Run.id,
                        Run.started_at,
                        Run.finished_at,
                        Run.result.arrow("timings_ms").as_alias("timings_ms"),
                    )
                    .where(where & (Run.id > after))
                    .order_by(Run.id)
                    .limit(PAGE)
                    .output(load_json=True)
                )
                for row in rows:
                    self._count(row, now)
                if len(rows) < PAGE:
                    break
                after = rows[-1]["id"]
            self.recent = {run: at for run, at in self.recent.items() if at >= now - SETTLE}
            self.read_until = now

    def _count(self, row: dict[str, Any], now: datetime) -> None:
        if row["id"] in self.recent:
            return
        finished = _aware(row["finished_at"])
        if finished >= now - SETTLE:
            self.recent[row["id"]] = finished
        seconds = vm_start_seconds(row["timings_ms"])
        if seconds is not None:
            self.vm_start.observe(seconds)
        if row["started_at"]:
            self.duration.observe(_seconds_between(row["started_at"], finished))


class SnapshotCollector(Collector):
    """Turns a Snapshot into metric families; it reads nothing itself."""

    def __init__(self, snapshot: Snapshot, finished: FinishedRuns) -> None:
        self.snapshot = snapshot
        self.finished = finished

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

        yield self.finished.vm_start.family(
            "cleanroom_vm_start_seconds", "VM launch to guest ready (timings_ms.start) of finished runs."
        )
        yield self.finished.duration.family(
            "cleanroom_run_duration_seconds", "finished_at - started_at of finished runs."
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

        by_company = ["company"]
        queued_age = GaugeMetricFamily(
            "cleanroom_queue_oldest_age_seconds",
            "Seconds the company's longest-queued run has waited since its approval (no series: none queued).",
            labels=by_company,
        )
        for owner, since in sorted(s.oldest_queued.items()):
            queued_age.add_metric([str(owner)], _seconds_between(since, s.now))
        awaiting_age = GaugeMetricFamily(
            "cleanroom_approval_oldest_age_seconds",
            "Seconds the company's oldest run awaiting approval has waited since it was proposed.",
            labels=by_company,
        )
        for owner, since in sorted(s.oldest_awaiting.items()):
            awaiting_age.add_metric([str(owner)], _seconds_between(since, s.now))
        pool = GaugeMetricFamily(
            "cleanroom_credits_pool", "The company's credit pool this period.", labels=by_company
        )
        used = GaugeMetricFamily(
            "cleanroom_credits_used",
            "Credits the company used this period (runs and platform).",
            labels=by_company,
        )
        for owner, (total, spent) in sorted(s.pools.items()):
            pool.add_metric([str(owner)], total)
            used.add_metric([str(owner)], spent)
        yield from (queued_age, awaiting_age, pool, used)

        if s.verified is not None:  # never run: no series (the alert rules treat it as absent)
            yield GaugeMetricFamily(
                "cleanroom_audit_verify_ok",
                "1 if the last `cleanroom audit verify` found the chain and its anchor intact, else 0.",
                value=1 if s.verified.get("ok") else 0,
            )
            yield GaugeMetricFamily(
                "cleanroom_audit_verify_timestamp_seconds",
                "When the last `cleanroom audit verify` ran (unix seconds).",
                value=float(s.verified["at"]),
            )


async def exposition(finished: FinishedRuns) -> bytes:
    """The Prometheus text format of what the database holds now (`finished`: this process's tally)."""
    snapshot = await read_snapshot()
    await finished.catch_up(snapshot.now)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot, finished))
    return generate_latest(registry) + generate_latest(observe.process_registry())


def finished_runs_of(request: Request[Any, Any, Any]) -> FinishedRuns:
    """The app's tally, made at its first scrape (one per app: a test's app starts from its own database)."""
    state = request.app.state
    tally = getattr(state, "metrics_finished_runs", None)
    if not isinstance(tally, FinishedRuns):
        tally = state.metrics_finished_runs = FinishedRuns()
    return tally


def check_access(request: Request[Any, Any, Any]) -> None:
    """The metrics token, whoever asks (401 otherwise); none set: metrics are off (403 for everyone)."""
    expected = get_settings().metrics_token
    if not expected:
        raise Forbidden("metrics are off: the operator sets CLEANROOM_METRICS_TOKEN to serve them")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected.encode()):
        raise NotAuthenticated("send 'Authorization: Bearer <metrics token>'")


class HttpMetrics(PrometheusMiddleware):
    """Litestar's Prometheus middleware, with its error counter there from the start (Litestar makes it at the
    first 5xx, so a dashboard or an alert on it would see no series until something failed)."""

    def __init__(self, app: Any, config: PrometheusConfig) -> None:
        super().__init__(app, config)
        self.requests_error_count({"method": "", "path": "", "status_code": 0, "app_name": ""})


# Litestar's Prometheus support: cleanroom_http_requests_total, cleanroom_http_request_duration_seconds and
# cleanroom_http_requests_error_total (5xx) by method, route template (not the path: ids would explode the
# series) and status code, in prometheus_client's registry; /metrics serves them with the product's figures
HTTP_METRICS = PrometheusConfig(
    app_name="cleanroom", prefix="cleanroom_http", group_path=True, middleware_class=HttpMetrics
)


# SELF_AUTHENTICATED: the app's scope guard would read the metrics token as a personal API token (401)
@get("/metrics", media_type=EXPOSITION_TYPE, opt=SELF_AUTHENTICATED, include_in_schema=False)
async def metrics_endpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Prometheus metrics (text format 0.0.4), for a scraper holding the metrics token."""
    check_access(request)
    return Response(await exposition(finished_runs_of(request)), media_type=EXPOSITION_TYPE)
