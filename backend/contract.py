"""What the OpenAPI document says each operation may answer besides success: the refusals it really sends, each
as the one problem document of `backend/errors.py` (`application/problem+json`).

Litestar documents a phantom 400 `{status_code, detail, extra}` for every handler with parameters; the API never
sends that body. `declare_refusals` replaces it, before the document is first built, with what the API does send:

- every operation reached with a credential: 401 (no session or token, or one that is not valid) and 403 (a
  token whose scope does not open it, an auditor's write, a request from another origin, a role's refusal);
- an operation with a request body: 400 (a body that is not JSON), 413 (larger than the API takes), 422;
- an operation with any parameter: 422 (a parameter or a field that fails its schema, with `fields`);
- an operation with a path parameter: 404 (nothing of that id that the caller may see);
- 429 and 503 carry `Retry-After`;
- and what an operation refuses beyond those (`EXTRA`, by method and path): a conflict, a limit, an empty pool.

The contract test (`tests/api/test_api_contract.py`) runs a property-based fuzzer against the app with a
person's session and an assistant's token: an answer whose status the document does not declare fails it, so a
new refusal cannot go undocumented."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Litestar, Request, Response
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.routes import HTTPRoute
from litestar.status_codes import HTTP_204_NO_CONTENT
from litestar.types import Scope
from pydantic import BaseModel, ConfigDict, Field

from backend.errors import PROBLEM_JSON, RETRY_STATUSES, Invalid
from backend.settings import get_settings


class Problem(BaseModel):
    """An RFC 9457 problem document. `error` is the refusal's code (what clients match on); members beyond these
    say more about one refusal (a limit's `scope` and `limit`, a dataset's `problems`)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="urn:cleanroom:problem:<code>")
    title: str
    status: int
    detail: str = Field(description="one sentence a person can read")
    error: str = Field(description="the refusal's code, stable across releases")


class FieldProblem(BaseModel):
    model_config = ConfigDict(extra="allow")

    message: str
    key: str | None = None
    source: str | None = None


class ValidationProblem(Problem):
    """A 422: the request or a field of it failed its schema (`fields`), or a value its rule."""

    fields: list[FieldProblem] | None = None


_DESCRIPTIONS = {
    400: "The body is not valid JSON.",
    401: "No valid session or token.",
    402: "The company's credit pool cannot cover it.",
    403: "Not allowed for this caller (its token's scope, an auditor's write, another origin, a role).",
    404: "Nothing of that id that the caller may see.",
    409: "The state changed, or the thing exists already.",
    410: "Gone for good (a file purged from the trash).",
    413: "Larger than the API takes.",
    422: "A parameter or a field failed its schema, or a value its rule.",
    429: "A limit was reached; Retry-After says when to try again.",
    503: "Not available on this server now; Retry-After says when to try again.",
}

# refusals beyond the rules above, by "METHOD /path" as the document names it; the fuzzer keeps this honest
EXTRA: dict[str, tuple[int, ...]] = {
    "POST /api/auth/login": (429,),
    "POST /api/runs": (
        402,
        404,
        409,
        429,
    ),  # 404: a Drive file or follow-up run named that the caller cannot see
    "POST /api/flows": (402, 404, 409, 429),
    "POST /api/drive/folders": (404,),  # the parent folder
    "POST /api/drive/files": (404, 429),  # the folder; uploads per hour
    "POST /api/auth/password-link": (404,),  # a link used, expired or revoked
    "POST /api/auth/set-password": (404,),
    "POST /api/company/teams": (409,),  # a team of that name exists
    "PATCH /api/company/teams/{team_id}": (409,),
    "POST /api/company/people/invitations": (409,),  # already a member
    "DELETE /api/company/sso": (404,),  # none configured
    "POST /api/company/people/{user_id}/deactivate": (409,),  # the last admin
    "POST /api/company/people/{user_id}/invitation": (409,),  # no open invitation
    "POST /api/runs/{run_id}/approve": (
        402,
        409,
    ),  # the pool cannot cover it; the hashes changed, not waiting
    "POST /api/runs/{run_id}/reject": (409,),  # not waiting
    "POST /api/runs/{run_id}/reruns": (409,),  # no bundle kept, one in flight, the daily budget spent
    "POST /api/schedules": (404, 409),  # the flow or run named; only a succeeded one
}


def _SOME(field: str) -> dict[str, Any]:  # noqa: N802 (reads as a rule)
    return {"required": [field], "properties": {field: {"minItems": 1}}}


def _named_datasets(properties: dict[str, Any]) -> None:
    """A dataset is named by a name: an empty string names none ("nothing to stage")."""
    items = properties.get("datasets", {}).get("items")
    if isinstance(items, dict):
        items.setdefault("minLength", 1)


# what the service refuses that a field's type cannot say, written into the components the document names
COMPONENT_RULES: dict[str, dict[str, Any]] = {
    # "nothing to stage: name at least one dataset or Drive file"
    "ProposalBody": {"anyOf": [_SOME("datasets"), _SOME("files")]},
    "StepBody": {"anyOf": [_SOME("datasets"), _SOME("files")]},
}

_RETRY_AFTER = {
    "schema": {"type": "integer", "minimum": 1},
    "description": "seconds to wait before trying again",
    "required": True,
}


def _spec(status: int) -> ResponseSpec:
    return ResponseSpec(
        data_container=ValidationProblem if status == 422 else Problem,
        description=_DESCRIPTIONS.get(status, "A refusal."),
        media_type=PROBLEM_JSON,
        generate_examples=False,
    )


def refusals_of(path: str, method: str, handler: Any) -> set[int]:
    """The refusal statuses one operation may answer (see the module's docstring for the rules)."""
    statuses = {401, 403}  # a handler that checks its own credential (a host's, the platform's) refuses too
    params = set(handler.parsed_fn_signature.parameters) - _RESERVED
    if "data" in params:
        statuses |= {400, 413, 422}
    if params or "{" in path:
        statuses.add(422)
    if "{" in path:
        statuses.add(404)
    statuses.update(EXTRA.get(f"{method} {path}", ()))
    return statuses


_RESERVED = frozenset({"request", "state", "scope", "headers", "cookies", "socket", "user", "dataset_names"})


def declare_refusals(app: Litestar) -> None:
    """Write each operation's refusals into its handler, before the OpenAPI document is first built; and make
    each path's `OPTIONS` name every method it answers."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        _allow_every_method(route)
        for handler in route.route_handlers:
            if not handler.resolve_include_in_schema():
                continue
            statuses: set[int] = set()
            for method in handler.http_methods:
                statuses |= refusals_of(route.path_format, method, handler)
            responses = dict(handler.responses or {})
            for status in sorted(statuses):
                responses.setdefault(status, _spec(status))
            handler.responses = responses


INT64 = (-(2**63), 2**63 - 1)


def _operator_caps(limits: dict[str, Any]) -> None:
    """A run may only lower the operator's caps (backend/runs/proposal.py), and a guest needs 256 MiB: the
    document says this server's caps, read from its settings."""
    s = get_settings()
    caps = {"wall_seconds": s.max_wall_seconds, "memory_mib": s.max_memory_mib, "vcpus": s.max_vcpus}
    for name, cap in caps.items():
        for option in limits.get(name, {}).get("anyOf", [limits.get(name, {})]):
            if option.get("type") == "integer":
                option["maximum"] = cap
                if name == "memory_mib":
                    option["minimum"] = 256


def _tighten(node: Any) -> None:
    """Every integer the API takes is a 64-bit one (ids, counts, limits): a bound left unsaid let a client send
    twenty digits as valid. A Python union is any of its members: Litestar writes `oneOf`, which a value that
    two members accept (a date is a string too) fails."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            node.setdefault("minimum", INT64[0])
            node.setdefault("maximum", INT64[1])
        if "oneOf" in node and "discriminator" not in node:
            node["anyOf"] = node.pop("oneOf")
        for value in node.values():
            _tighten(value)
    elif isinstance(node, list):
        for value in node:
            _tighten(value)


class ContractJsonPlugin(JsonRenderPlugin):
    """The JSON document, with what Litestar's spec cannot say: the `Retry-After` header every 429 and 503
    answer carries, and the 64-bit bound of every integer."""

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        _tighten(openapi_schema)
        _versioned_paths(openapi_schema)
        components = openapi_schema.get("components", {}).get("schemas", {})
        for name, rule in COMPONENT_RULES.items():
            if name in components:
                components[name].update(rule)
        for name in ("ProposalBody", "StepBody"):
            _named_datasets(components.get(name, {}).get("properties", {}))
        if limits := components.get("LimitsBody", {}).get("properties"):
            _operator_caps(limits)  # after _tighten: a cap bounds the integer member of `anyOf`
        for operations in openapi_schema.get("paths", {}).values():
            for operation in operations.values():
                if not isinstance(operation, dict):
                    continue
                for status, response in (operation.get("responses") or {}).items():
                    if str(status) in {str(s) for s in RETRY_STATUSES}:
                        response.setdefault("headers", {})["Retry-After"] = _RETRY_AFTER
        return super().render(request, openapi_schema)


def _allow_every_method(route: HTTPRoute) -> None:
    """Litestar makes a path's `OPTIONS` answer when the path's first handler is registered; a path whose
    methods come from more than one registration (a controller's GET, then its POST, under a router of their
    own) kept answering `Allow` with the first one's methods only (RFC 9110 15.5.6 wants them all). Its
    function is made again over the route as it ended up."""
    handler, _ = route.route_handler_map.get("OPTIONS", (None, None))
    if handler is None or handler.handler_name != "options_handler":
        return  # an OPTIONS of our own (none today) says what it says
    allow = ", ".join(sorted(route.methods))

    def options_handler(scope: Scope) -> Response[None]:
        return Response(
            content=None, status_code=HTTP_204_NO_CONTENT, headers={"Allow": allow}, media_type="text/plain"
        )

    # same signature as Litestar's own (a sync function it runs as it runs its own), registered already
    handler._fn = options_handler  # type: ignore[assignment]


def iso_datetime(value: str | None, name: str) -> datetime | None:
    """A date-time query parameter, read as the document says: an ISO 8601 string (`2026-12-01T09:00:00Z`).
    Declared as `str` with `DATE_TIME` (msgspec alone also took a number of seconds, `?until=0.5`)."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(
            {
                "message": f"{name} must be an ISO 8601 date-time, like 2026-12-01T09:00:00Z",
                "fields": [{"message": "not an ISO 8601 date-time", "key": name, "source": "query"}],
            }
        ) from None


DATE_TIME: dict[str, Any] = {"format": "date-time"}  # Parameter(schema_extra=DATE_TIME) on a `str` query


# ---- /api/v1 -------------------------------------------------------------------------------------------------
# The document names every operation under /api/v1/; the paths without the version (/api/runs) answer the same, as
# aliases kept for one release (docs/api.md), each answer to them saying so (`Deprecation`, RFC 9745, and a `Link`
# to its successor). The routes themselves are registered once, under /api/: a request to /api/v1/x is served as
# /api/x (`versioned`), so there is one handler, one guard and one audit path for both.
V1 = "/api/v1/"
UNVERSIONED = "/api/"


def versioned(scope: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the scope the routes see, whether the request used an alias without the version)."""
    path: str = scope.get("path", "")
    if path.startswith(V1):
        inner = dict(scope)
        inner["path"] = UNVERSIONED + path[len(V1) :]
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.startswith(V1.encode()):
            inner["raw_path"] = UNVERSIONED.encode() + raw[len(V1) :]
        return inner, False
    return scope, path.startswith(UNVERSIONED)


def deprecation_headers(path: str) -> list[tuple[bytes, bytes]]:
    successor = V1 + path[len(UNVERSIONED) :]
    return [(b"deprecation", b"true"), (b"link", f'<{successor}>; rel="successor-version"'.encode())]


def _versioned_paths(document: dict[str, Any]) -> None:
    paths = document.get("paths", {})
    for path in [p for p in paths if p.startswith(UNVERSIONED) and not p.startswith(V1)]:
        paths[V1 + path[len(UNVERSIONED) :]] = paths.pop(path)
