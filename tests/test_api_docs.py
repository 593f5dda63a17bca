"""docs/api.md describes the API the OpenAPI schema describes: every route the app serves is in the
document, and every `/api/...` route the document names is served (parameter names aside). Response
shapes are the schema's own: no handler answers with an untyped object."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
PARAM = re.compile(r"\{[^}]*\}")
METHODS = ("get", "post", "put", "patch", "delete")


def _shape(path: str) -> str:
    return PARAM.sub("{}", path.rstrip("/") or "/")


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The API of a fleet: every route of the embedded default, and /api/worker, which only a fleet serves."""
    from backend.app import create_app
    from backend.settings import get_settings

    url = f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'schema.sqlite3'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLEANROOM_WORKERS", "fleet")
        get_settings.cache_clear()
        schema = create_app(database_url=url, run_hooks=False, pool=False).openapi_schema.to_schema()
    get_settings.cache_clear()
    return schema


def _documented() -> set[str]:
    """The paths the page names, as the app registers them: the page writes most without the version (the
    aliases, which answer as `/api/v1/...` does: backend/contract.py)."""
    text = DOC.read_text()
    found = (m.group(0) for m in re.finditer(r"/(?:api|mcp)[A-Za-z0-9_/{}-]*", text))
    return {_shape(re.sub(r"^/api/v1(?=/|$)", "/api", path)) for path in found}


def test_every_served_route_is_documented(schema: dict) -> None:
    documented = _documented()
    served = {_shape(path) for path in schema["paths"] if not path.startswith("/schema")}
    assert sorted(served - documented) == []


def test_the_documents_version_is_the_installed_packages(schema: dict) -> None:
    from importlib.metadata import version

    assert schema["info"]["version"] == version("cleanroom")  # backend/version.py; was "0.1.0" for ever


def test_every_documented_route_is_served(schema: dict) -> None:
    served = {_shape(path) for path in schema["paths"]}
    # a prefix mentioned in prose ("/api/...") is not a route
    named = {p for p in _documented() if p not in ("/api", "/mcp") and not p.endswith("/")}
    assert sorted(named - served) == []


def untyped_responses(schema: dict) -> list[str]:
    """Operations whose success body is an object of unknown shape (`dict[str, Any]` in a handler)."""
    loose = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in METHODS:
                continue
            for code, response in (operation.get("responses") or {}).items():
                body = (response.get("content") or {}).get("application/json", {}).get("schema") or {}
                shapeless = "properties" not in body and "$ref" not in body
                open_ended = body.get("additionalProperties") in (None, {}, True)
                if code.startswith("2") and body.get("type") == "object" and shapeless and open_ended:
                    loose.append(f"{method.upper()} {path}")
    return loose


def test_no_response_is_an_untyped_object(schema: dict) -> None:
    assert untyped_responses(schema) == []


def test_positive_control_a_dict_handler_is_noticed() -> None:
    from typing import Any

    from litestar import Litestar, get

    @get("/loose", sync_to_thread=False)
    def loose() -> dict[str, Any]:
        return {}

    assert untyped_responses(Litestar([loose]).openapi_schema.to_schema()) == ["GET /loose"]
