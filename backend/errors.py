"""One error body for the whole API: {"error": code, "detail": ...}."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from backend import observe

log = logging.getLogger("cleanroom.api")


class AppError(Exception):
    """A refusal the user can read. Services raise these; the API turns them into error bodies."""

    status_code = 400
    code = "bad_request"

    def __init__(self, detail: Any, *, code: str | None = None, status_code: int | None = None) -> None:
        super().__init__(detail if isinstance(detail, str) else str(detail))
        self.detail = detail
        if code:
            self.code = code
        if status_code:
            self.status_code = status_code


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


def _body(code: str, detail: Any, status: int) -> Response[dict[str, Any]]:
    observe.count_refusal(status, code)  # a 4xx is a refusal, counted by its code (/metrics)
    return Response({"error": code, "detail": detail}, status_code=status, media_type=MediaType.JSON)


def app_error_handler(_: Request, exc: AppError) -> Response[dict[str, Any]]:
    return _body(exc.code, exc.detail, exc.status_code)


def validation_handler(_: Request, exc: ValidationException) -> Response[dict[str, Any]]:
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
}


def http_error_handler(_: Request, exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    return _body(_HTTP_CODES.get(status, "error"), exc.detail, status)


def unexpected_handler(request: Request, exc: Exception) -> Response[dict[str, Any]]:
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
