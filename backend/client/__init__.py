"""The one typed client of the Cleanroom HTTP API: the console, the MCP tools and the fleet host agent speak
the API through it and read the backend's own pydantic response schemas, never raw dicts.

- `http.py`   `ApiClient`: sends a request over one shared `httpx.AsyncClient`, turns a refusal into the
              caller's own exception, and decodes a body into a schema (`decode`);
- `api.py`    `CleanroomClient`: one typed method per endpoint the clients call.

Whoever constructs it decides how it authenticates (the console's session cookie, an assistant's bearer token,
a host's signed requests) by overriding `ApiClient`'s hooks. The package imports schemas and status enums only:
no table, no service, no Piccolo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backend.client.http import ApiClient, Refusal, decode, refusal_of, shared_http

if TYPE_CHECKING:
    from backend.client.api import REPORTS, CleanroomClient

__all__ = ["REPORTS", "ApiClient", "CleanroomClient", "Refusal", "decode", "refusal_of", "shared_http"]


def __getattr__(name: str) -> Any:
    """`CleanroomClient` (every endpoint's schema with it) loads when it is first named: a client of one API
    part (a fleet host's `HostClient` on `ApiClient`) does not load every other part's schemas."""
    if name in ("REPORTS", "CleanroomClient"):
        from backend.client import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
