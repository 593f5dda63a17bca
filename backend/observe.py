"""What an operator sees of a process: its log lines (one JSON object per line, or plain text), the request id
every line of a request carries, and the product's event counters (Prometheus).

Request ids. The console takes one from its caller's `X-Request-Id` (a proxy's) or makes one, and sends it to
the API with every call it makes for that page or event; the API takes it (or makes one), answers with it in
`X-Request-Id`, and every log line of the request carries it. A run stores the id of the request that proposed
it, and the worker that runs it logs under that id (the local worker, and a fleet host, which gets it with the
claimed job). A caller's id is kept only if it is a plain token (REQUEST_ID: letters, digits, `.-_:`, at most
64): anything else (a newline, a quote, a megabyte) is replaced by a fresh id, never logged.

Counters (prometheus_client, `GET /metrics`): findings by category, refusals by kind (the API's error code),
credits charged by kind and failed sign-ins. Counted where they happen, in whichever process: under
`cleanroom serve` every process (each API process, the local worker) writes them into one folder
(`PROMETHEUS_MULTIPROC_DIR`, prometheus_client's multi-process mode) and /metrics adds them up.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    multiprocess,
)

REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own name for the shared folder

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("cleanroom_request_id", default=None)


def new_request_id() -> str:
    return secrets.token_hex(8)


def accepted_request_id(given: str | None) -> str:
    """The caller's id if it is a plain token, else a fresh one (a hostile id never reaches a log line)."""
    if given and REQUEST_ID.fullmatch(given):
        return given
    return new_request_id()


def current_request_id() -> str | None:
    return _request_id.get()


def set_request_id(value: str | None) -> contextvars.Token[str | None]:
    return _request_id.set(value)


@contextmanager
def request_id(value: str | None) -> Iterator[str | None]:
    """Log lines written inside carry `value` (a worker running a run under the id of the request behind it)."""
    token = _request_id.set(value)
    try:
        yield value
    finally:
        _request_id.reset(token)


def outgoing_request_id() -> str:
    """The id a call to the API carries: the one this context works under, or a fresh one."""
    return current_request_id() or new_request_id()


class RequestIdMiddleware:
    """ASGI: the request's id (the caller's `X-Request-Id` if plain, else fresh) for every log line of the
    request, echoed in the answer's `X-Request-Id`. Used by the API and by the console."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = None
        for name, value in scope.get("headers") or ():
            if name == b"x-request-id":
                given = value.decode("latin-1")
                break
        rid = accepted_request_id(given)
        scope.setdefault("state", {})["request_id"] = rid

        async def send_with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", rid.encode())]}
            await send(message)

        token = _request_id.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _request_id.reset(token)


# --- log lines ---------------------------------------------------------------------------------------------

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "request_id", "color_message"}


class RequestIdFilter(logging.Filter):
    """Puts the current request id on every record a handler writes (a filter on the handler: records of
    every logger pass it, the ones libraries write too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id when there is one,
    the exception's traceback as `exc`, and what a caller passed in `extra=`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if rid := getattr(record, "request_id", None):
            line["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


class TextFormatter(logging.Formatter):
    """The plain lines of before, with ` [request id]` at the end of a request's lines."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        rid = getattr(record, "request_id", None)
        return f"{text} [{rid}]" if rid else text


def log_format(setting: str | None = None) -> str:
    """`json` or `text`: the setting (CLEANROOM_LOG_FORMAT), where `auto` is text on a terminal (the demo,
    `scripts/run`) and JSON otherwise (a service under systemd, whose stderr goes to the journal)."""
    if setting is None:
        from backend.settings import get_settings

        setting = get_settings().log_format
    if setting == "auto":
        return "text" if sys.stderr.isatty() else "json"
    return setting


def handler(fmt: str, stream: Any = None) -> logging.Handler:
    out = logging.StreamHandler(stream or sys.stderr)
    out.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    out.addFilter(RequestIdFilter())
    return out


def configure_logging(setting: str | None = None, *, level: int = logging.INFO) -> str:
    """The process's log lines: the root logger writes to stderr in the chosen format; uvicorn's loggers
    pass theirs to it (so its access lines carry the request id too). Returns the format chosen."""
    fmt = log_format(setting)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_cleanroom", False):
            root.removeHandler(old)
    new = handler(fmt)
    new._cleanroom = True  # type: ignore[attr-defined]
    root.addHandler(new)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        named = logging.getLogger(name)
        named.handlers.clear()
        named.propagate = True
    return fmt


# --- counters ----------------------------------------------------------------------------------------------

FINDINGS = Counter(
    "cleanroom_findings",
    "Injection findings on proposed runs (code and staged data), by category.",
    ["category"],
)
REFUSALS = Counter("cleanroom_refusals", "Requests the API refused (4xx), by error code.", ["kind"])
CHARGES = Counter("cleanroom_credits_charged", "Credits charged, by kind (run, platform).", ["kind"])
FAILED_SIGN_INS = Counter(
    "cleanroom_failed_sign_ins",
    "Password sign-ins refused: credentials (a wrong or unknown e-mail or password) or throttled (too many).",
    ["reason"],
)


def count_findings(findings: list[dict[str, Any]] | list[Any]) -> None:
    for finding in findings:
        category = (
            finding.get("category") if isinstance(finding, dict) else getattr(finding, "category", None)
        )
        FINDINGS.labels(str(category or "unknown")).inc()


def count_refusal(status: int, code: str) -> None:
    if 400 <= status < 500:
        REFUSALS.labels(code).inc()


def count_charge(kind: str, credits: float | None) -> None:
    if credits:
        CHARGES.labels(kind).inc(float(credits))


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower())


_MULTIPROCESS: CollectorRegistry | None = None


def process_registry() -> CollectorRegistry:
    """What the processes count themselves, for /metrics: requests per route (Litestar's middleware), the
    counters above, and the process and garbage-collector collectors of the process that answers. Under
    `cleanroom serve` (PROMETHEUS_MULTIPROC_DIR set) the counts of every process of the service, the local
    worker's too, are added up from their shared folder."""
    global _MULTIPROCESS
    if not multiprocess_dir():
        return REGISTRY  # one process (tests, a bare `uvicorn`): prometheus_client's default registry
    if _MULTIPROCESS is None:
        registry = CollectorRegistry(auto_describe=False)
        multiprocess.MultiProcessCollector(registry)
        ProcessCollector(registry=registry)
        GCCollector(registry=registry)
        PlatformCollector(registry=registry)
        _MULTIPROCESS = registry
    return _MULTIPROCESS
