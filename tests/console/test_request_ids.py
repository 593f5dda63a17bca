"""The console's side of the request id (backend/observe.py): the page's request takes its caller's id (or a
fresh one) and every API call made for it carries that id in X-Request-Id; a hostile id is replaced before it
reaches a log line or the API. And the log formats: one JSON object per line (an injected newline stays
inside its string), or text with the id at the end; `auto` is text on a terminal only.

No database: a Starlette app (the console's framework) with the console's middleware, calling the API through
the console's own client class over a transport that records what the API would receive."""

from __future__ import annotations

import io
import json
import logging
import os
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend import observe
from console.api import Api, ApiConfig


def console_with_api() -> tuple[httpx.AsyncClient, list[str | None]]:
    """A console page that makes two API calls; what the API received as X-Request-Id, per call."""
    received: list[str | None] = []

    def api(request: httpx.Request) -> httpx.Response:
        received.append(request.headers.get("x-request-id"))
        return httpx.Response(200, json={"status": "ok", "scope": "public"})

    config = ApiConfig("http://api.test", transport=httpx.MockTransport(api), origin="")

    async def page(request: Request) -> JSONResponse:
        client = Api(config, session="s")
        await client.health()
        await client.health()
        return JSONResponse({"page_id": observe.current_request_id()})

    app = Starlette(routes=[Route("/runs", page)])
    app.add_middleware(observe.RequestIdMiddleware)
    browser = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test")
    return browser, received


async def test_the_console_sends_the_page_s_id_with_every_api_call_it_makes_for_it() -> None:
    browser, received = console_with_api()
    async with browser:
        given = await browser.get("/runs", headers={"X-Request-Id": "proxy-7f3a"})
        assert given.headers["x-request-id"] == "proxy-7f3a" and given.json()["page_id"] == "proxy-7f3a"
        assert received == ["proxy-7f3a", "proxy-7f3a"]

        made = await browser.get("/runs")  # none given: one made at the console, the same for both calls
        made_id = made.headers["x-request-id"]
        assert observe.REQUEST_ID.fullmatch(made_id) and received[2:] == [made_id, made_id]

        hostile = await browser.get("/runs", headers={"X-Request-Id": "a b\r\nX-Evil: 1"})
        replaced = hostile.headers["x-request-id"]
        assert replaced != "a b\r\nX-Evil: 1" and received[4:] == [replaced, replaced]
    assert observe.current_request_id() is None  # nothing leaks out of a request


async def test_an_api_call_outside_any_request_gets_a_fresh_id_each_time() -> None:
    received: list[str | None] = []
    transport = httpx.MockTransport(
        lambda request: (
            received.append(request.headers.get("x-request-id"))
            or httpx.Response(200, json={"status": "ok", "scope": "public"})
        )
    )
    client = Api(ApiConfig("http://api.test", transport=transport, origin=""))
    await client.health()
    await client.health()
    with observe.request_id("run-42-request"):  # the worker's context: its calls carry the run's id
        await client.health()
    assert received[0] != received[1] and all(observe.REQUEST_ID.fullmatch(r or "") for r in received[:2])
    assert received[2] == "run-42-request"


def test_log_lines_are_one_json_object_each_or_text_with_the_id() -> None:
    out = io.StringIO()
    logger = logging.getLogger("cleanroom.test_request_ids")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for fmt in ("json", "text"):
        handler = observe.handler(fmt, out)
        logger.addHandler(handler)
        with observe.request_id("req-1"):
            logger.info('a message with a newline\n{"level": "CRITICAL"}', extra={"run_id": 7})
        logger.info("outside")
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    first, second = json.loads(lines[0]), json.loads(lines[1])
    assert first["request_id"] == "req-1" and first["run_id"] == 7 and first["level"] == "INFO"
    assert first["message"] == 'a message with a newline\n{"level": "CRITICAL"}'  # inside its string
    assert "request_id" not in second and second["message"] == "outside"
    assert lines[2].endswith("a message with a newline") and lines[3] == '{"level": "CRITICAL"} [req-1]'
    assert lines[4].endswith("cleanroom.test_request_ids INFO outside")  # no id outside a request


def test_auto_is_text_on_a_terminal_and_json_otherwise(monkeypatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Tty())
    assert observe.log_format("auto") == "text"
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert observe.log_format("auto") == "json"
    assert observe.log_format("text") == "text" and observe.log_format("json") == "json"


async def test_a_fleet_host_runs_a_claimed_job_under_its_request_id(monkeypatch, tmp_path) -> None:
    """The host agent gets the proposing request's id with the claimed job: its log lines about the run carry
    it, and so do its calls to the API about that run; a call outside a job (a heartbeat) gets a fresh one."""
    from backend.fleet.host_agent import HostAgent
    from backend.fleet.schemas import HeartbeatBody

    monkeypatch.setenv("CLEANROOM_DATA_DIR", str(tmp_path))
    from backend.settings import get_settings

    get_settings.cache_clear()
    received: list[tuple[str, str | None]] = []
    job = {
        "run_id": 42, "code": "print(1)", "code_sha256": "c", "approved_code_sha256": "c",
        "approved_bundle_sha256": "b", "approved_at": None, "manifest": {}, "limits": {}, "read_actions": True,
        "bundle_url": "/b", "result_url": "/r", "request_id": "proposal-req-9",
    }  # fmt: skip

    def api(request: httpx.Request) -> httpx.Response:
        received.append((request.url.path, request.headers.get("x-request-id")))
        return httpx.Response(200, json=job if request.url.path.endswith("/claim") else {"ok": True})

    http = httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(api))
    agent = HostAgent(host_id="alpha", api_url="http://api.test", token="t", capacity=1, http=http)

    async def run(run_id, claimed, scratch) -> None:  # stands in for the VM: one call about the run
        logging.getLogger("cleanroom.fleet.host").info("run %s: working", run_id)
        await agent.api.vm_started(run_id)

    monkeypatch.setattr(agent, "_run", run)
    out = io.StringIO()
    handler = observe.handler("json", out)
    logger = logging.getLogger("cleanroom.fleet.host")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        await agent.handle(42)
        await agent.api.heartbeat(HeartbeatBody())
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        await agent.api.aclose()
        get_settings.cache_clear()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["message"], line.get("request_id")) for line in lines] == [
        ("run 42: claimed", "proposal-req-9"),
        ("run 42: working", "proposal-req-9"),
    ]
    assert received[:2] == [
        ("/api/v1/worker/runs/42/claim", received[0][1]),
        ("/api/v1/worker/runs/42/vm-started", "proposal-req-9"),
    ]
    heartbeat = received[2][1]
    assert received[2][0] == "/api/v1/worker/heartbeat" and heartbeat != "proposal-req-9"
    assert observe.REQUEST_ID.fullmatch(heartbeat or "") and observe.REQUEST_ID.fullmatch(
        received[0][1] or ""
    )


def test_under_serve_every_process_s_counts_are_added_up_by_metrics(tmp_path) -> None:
    """`cleanroom serve` points every process at one folder (PROMETHEUS_MULTIPROC_DIR): what the local worker
    and each API process count, /metrics adds up. Two processes count charges; a third, as the API answering
    the scrape, serves their sum. Control: without the folder, a process serves only its own counts."""
    import subprocess
    import sys

    from backend.settings import REPO_ROOT

    def python(code: str, folder: Path | None) -> str:
        env = {k: v for k, v in os.environ.items() if k.lower() != observe.MULTIPROC_ENV.lower()}
        if folder is not None:
            env[observe.MULTIPROC_ENV] = str(folder)
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    count = "from backend import observe; observe.count_charge('run', {}); observe.FINDINGS.labels('x').inc()"
    serve = (
        "from prometheus_client import generate_latest; "
        "from backend import observe; print(generate_latest(observe.process_registry()).decode())"
    )
    shared = tmp_path / "metrics"
    shared.mkdir()
    python(count.format(2.5), shared)  # the local worker charging a run
    python(count.format(1.25), shared)  # an API process charging another
    scraped = python(serve, shared)
    assert 'cleanroom_credits_charged_total{kind="run"} 3.75' in scraped
    assert 'cleanroom_findings_total{category="x"} 2.0' in scraped
    assert "process_cpu_seconds_total" in scraped and "python_gc_collections_total" in scraped
    alone = python(serve, None)  # control: one process, its own counts only (none)
    assert "cleanroom_credits_charged_total{" not in alone and "process_cpu_seconds_total" in alone
