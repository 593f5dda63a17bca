"""One error body for the whole API: an RFC 9457 problem document (`application/problem+json`).

    {"type": "urn:cleanroom:problem:<code>", "title": "Too Many Requests", "status": 429,
     "detail": "<a sentence>", "error": "<code>", ...extension members}

`error` is the code clients matched on before problem details, kept as an extension member; `detail` is always a
sentence. A refusal that says more than a sentence (a validation's `fields`, a dataset's `problems`) puts the rest
as extension members beside it. Every 429 and 503 answers with `Retry-After` (seconds)."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from backend import observe

log = logging.getLogger("cleanroom.api")

PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE = "urn:cleanroom:problem:"  # + the code: a stable name (RFC 9457 3.1.1), not a page to fetch
RETRY_STATUSES = (429, 503)
DEFAULT_RETRY_AFTER = 60  # seconds, for a 429 or 503 whose raiser knows no better
_RESERVED = frozenset({"type", "title", "status", "detail", "error", "instance", "message"})


class AppError(Exception):
    """A refusal the user can read. Services raise these; the API turns them into problem documents."""

    status_code = 400
    code = "bad_request"
    retry_after: int | None = None  # seconds, sent as Retry-After on a 429 or 503

    def __init__(
        self,
        detail: Any,
        *,
        code: str | None = None,
        status_code: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(detail if isinstance(detail, str) else str(detail))
        self.detail = detail
        if code:
            self.code = code
        if status_code:
            self.status_code = status_code
        if retry_after is not None:
            self.retry_after = retry_after


class NotAuthenticated(AppError):
    status_code = 401
    code = "not_authenticated"


class Forbidden(AppError):
    status_code = 403
    code = "forbidden"


class NotFound(AppError):
    status_code = 404
    code = "not_found"


class Conflict(AppError):
    status_code = 409
    code = "conflict"


class Invalid(AppError):
    status_code = 422
    code = "invalid"


class TooManyRequests(AppError):
    status_code = 429
    code = "too_many_requests"


class PaymentRequired(AppError):
    status_code = 402
    code = "credits_exhausted"


def problem(
    code: str,
    detail: Any,
    status: int,
    *,
    retry_after: int | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """One refusal's problem document and headers. A `detail` given as a mapping (`{"message": ..., "fields":
    [...]}`) gives its message as `detail` and its other keys as extension members."""
    members: dict[str, Any] = {}
    if isinstance(detail, dict):
        members = {k: v for k, v in detail.items() if k not in _RESERVED}
        message = detail.get("message")
        text = str(message) if message is not None else "; ".join(f"{k}: {v}" for k, v in members.items())
    else:
        text = "" if detail is None else str(detail)
    body = {
        "type": PROBLEM_TYPE + code,
        "title": _title(status),
        "status": status,
        "detail": text,
        "error": code,
    }
    body.update(members)
    out = dict(headers or {})
    if status in RETRY_STATUSES:
        out.setdefault("Retry-After", str(max(1, int(retry_after or DEFAULT_RETRY_AFTER))))
    return body, out


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _body(
    code: str,
    detail: Any,
    status: int,
    *,
    retry_after: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    observe.count_refusal(status, code)  # a 4xx is a refusal, counted by its code (/metrics)
    content, out = problem(code, detail, status, retry_after=retry_after, headers=headers)
    return Response(content, status_code=status, media_type=PROBLEM_JSON, headers=out)


def app_error_handler(_: Request[Any, Any, Any], exc: AppError) -> Response[dict[str, Any]]:
    return _body(exc.code, exc.detail, exc.status_code, retry_after=exc.retry_after)


def validation_handler(_: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    return _body("invalid", {"message": exc.detail, "fields": exc.extra or []}, 422)


_HTTP_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    429: "too_many_requests",
    503: "unavailable",
}


def http_error_handler(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    # Litestar's own refusals keep their headers: a 405 names the methods the path answers (RFC 9110 15.5.6)
    return _body(_HTTP_CODES.get(status, "error"), exc.detail, status, headers=dict(exc.headers or {}))


_OUT_OF_RANGE = (
    "too large to convert to SQLite INTEGER",  # sqlite3
    "out of int64 range",  # asyncpg
    "int too big to convert",
    "Integer exceeds 64-bit range",  # orjson, writing an answer or an audit entry that holds it
)
_INT64 = 2**63 - 1


def _huge_number(request: Request[Any, Any, Any]) -> bool:
    """A query or path parameter that is a whole number past 64 bits."""
    values = [*request.query_params.values(), *(str(v) for v in request.path_params.values())]
    return any(v.lstrip("+-").isdigit() and abs(int(v)) > _INT64 for v in values)


def unexpected_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    # a number the database cannot hold (an id of twenty digits) is the request's fault, whichever engine said it;
    # the document bounds every integer to 64 bits (backend/contract.py)
    if any(words in str(exc) for words in _OUT_OF_RANGE) or _huge_number(request):
        return _body(
            "invalid", "a number in the request is out of range (numbers here are 64-bit integers)", 422
        )
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _body(
        "internal_error",
        f"unexpected {type(exc).__name__}; see the server log",
        HTTP_500_INTERNAL_SERVER_ERROR,
    )


EXCEPTION_HANDLERS = {
    AppError: app_error_handler,
    ValidationException: validation_handler,
    HTTPException: http_error_handler,
}
