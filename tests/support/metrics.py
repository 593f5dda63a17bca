"""Scraping /metrics with its token and reading samples out of the text format."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from backend.metrics import MEDIA_TYPE
from backend.runs.tables import Run
from backend.sandbox.models import SandboxResult, Timings
from tests.support.runs import proposal

LOOPBACK = ("127.0.0.1", 40000)


METRICS_TOKEN = "metrics-" + "x" * 32


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@asynccontextmanager
async def scraper(client, address: tuple[str, int] = LOOPBACK) -> AsyncIterator[httpx.AsyncClient]:
    """The test app, called from `address`, with no cookie and no token of the test client's."""
    transport = httpx.ASGITransport(app=client.app, client=address)
    async with httpx.AsyncClient(transport=transport, base_url=str(client.base_url)) as http:
        yield http


async def scrape_text(client, headers: dict[str, str] | None = None) -> str:
    """A scrape with the metrics token (unless `headers` says otherwise), as the scraper receives it."""
    headers = headers or {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with scraper(client) as http:
        response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == MEDIA_TYPE
    return response.text


# the families read from the runs and worker hosts in the database, whose figures these tests compare scrape to
# scrape; a scrape also holds the process's own (request counts, CPU, garbage collection) and time-dependent
# ages, which move between two scrapes by design (tests/fleet/test_observe.py checks those)
DATABASE_FAMILIES = (
    "cleanroom_runs",
    "cleanroom_queue_depth",
    "cleanroom_vm_start_seconds",
    "cleanroom_run_duration_seconds",
    "cleanroom_worker_capacity",
    "cleanroom_worker_running",
    "cleanroom_worker_heartbeat_age_seconds",
    "cleanroom_worker_up",
)


def samples_of(
    text: str, types: tuple[str, ...] | None = None, families: tuple[str, ...] | None = DATABASE_FAMILIES
) -> Samples:
    """The samples of a scrape's `families` (None: all), only those of families of `types` if given."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        if (families is None or family.name in families) and (types is None or family.type in types)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


async def propose(client, token: dict[str, str], status: str | None = None, **values: Any) -> int:
    """A run proposed by the assistant, its status (and any other column) then set directly."""
    response = await client.post("/api/runs", json=proposal(), headers=token)
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    update = {getattr(Run, key): v for key, v in values.items()}
    if status:
        update[Run.status] = status
    if update:
        await Run.update(update).where(Run.id == run_id)
    return run_id


def _result(start_ms: float | None) -> dict[str, Any] | None:
    """A stored result as the worker keeps it; None: a run that never got one."""
    if start_ms is None:
        return None
    result = SandboxResult(
        status="succeeded", exit_code=0, timings_ms=Timings(start=start_ms, total=start_ms + 900)
    )
    return result.model_dump(mode="json", exclude={"actions"})
