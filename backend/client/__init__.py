"""The one typed client of the Cleanroom HTTP API: the console, the MCP tools and the fleet host agent speak
the API through it and read the backend's own pydantic response schemas, never raw dicts.

- `http.py`   `ApiClient`: sends a request over one shared `httpx.AsyncClient`, turns a refusal into the
              caller's own exception, and decodes a body into a schema (`decode`);
- `api.py`    `CleanroomClient`: one typed method per endpoint the clients call.

Whoever constructs it decides how it authenticates (the console's session cookie, an assistant's bearer token,
a host's signed requests) by overriding `ApiClient`'s hooks. The package imports schemas and status enums only:
no table, no service, no Piccolo.
"""

from backend.client.api import REPORTS, CleanroomClient
from backend.client.http import ApiClient, Refusal, decode, refusal_of, shared_http

__all__ = ["REPORTS", "ApiClient", "CleanroomClient", "Refusal", "decode", "refusal_of", "shared_http"]
