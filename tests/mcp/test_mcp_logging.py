"""The MCP server's in-process calls to the API are not logged twice, and nothing else httpx logs is lost:
the console's calls to the API stay in the log whatever ran before in the process (a test that started the
API's lifespan used to turn httpx's logger down for every later test)."""

from __future__ import annotations

import logging

import pytest

from backend.mcp.http import IN_PROCESS_BASE, _quiet_in_process_calls

LINE = 'HTTP Request: %s %s "%s %d %s"'  # httpx's own format


def test_in_process_calls_are_dropped_and_other_calls_kept(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    _quiet_in_process_calls()
    _quiet_in_process_calls()  # the API's lifespan may start more than once in a process: one filter
    httpx_log = logging.getLogger("httpx")
    assert len(httpx_log.filters) == len(set(map(id, httpx_log.filters)))
    httpx_log.info(LINE, "GET", f"{IN_PROCESS_BASE}/api/runs/7", "HTTP/1.1", 200, "OK")
    httpx_log.info(LINE, "POST", "http://127.0.0.1:44185/api/me/tokens", "HTTP/1.1", 201, "Created")
    logged = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert logged == ['HTTP Request: POST http://127.0.0.1:44185/api/me/tokens "HTTP/1.1 201 Created"']
    assert httpx_log.getEffectiveLevel() <= logging.INFO  # the level is left alone
