"""The API's own origin serves no page that loads JavaScript from elsewhere (L5): the OpenAPI document is
published as JSON, and no UI renderer (Swagger UI, ReDoc, … all fetch their scripts from a CDN) is served."""

from __future__ import annotations

import pytest

from tests.support.http import console_origin

pytestmark = pytest.mark.sqlite  # the pages an origin serves, not an engine's

CDN_MARKERS = ("cdn.jsdelivr.net", "unpkg.com", "cdnjs", "<script")
UI_PATHS = [
    "/schema",
    "/schema/swagger",
    "/schema/redoc",
    "/schema/elements",
    "/schema/rapidoc",
    "/schema/scalar",
]


@pytest.fixture
async def plain_client(demo_db: str):
    from litestar.testing import AsyncTestClient

    from backend.app import create_app

    app = create_app(database_url=demo_db, run_hooks=False, pool=False)
    async with AsyncTestClient(app=app) as client:
        client.headers["origin"] = console_origin()
        yield client


async def test_the_openapi_document_is_still_published(plain_client) -> None:
    r = await plain_client.get("/schema/openapi.json")  # positive control: what docs/api.md points at
    assert r.status_code == 200 and "/api/v1/records/{dataset}" in r.json()["paths"]


@pytest.mark.parametrize("path", UI_PATHS)
async def test_no_schema_page_loads_a_script(plain_client, path: str) -> None:
    r = await plain_client.get(path)
    body = r.text.lower()
    assert not any(marker in body for marker in CDN_MARKERS), (path, r.status_code, body[:300])
    if r.status_code == 200:  # /schema itself answers with the JSON document, nothing to render
        assert r.headers["content-type"].startswith(("application/json", "application/vnd.oai.openapi+json"))


async def test_positive_control_a_swagger_page_is_caught() -> None:
    """The markers above do find a UI renderer's page: Litestar's Swagger UI, as the API served it before."""
    from litestar import Litestar, get
    from litestar.openapi import OpenAPIConfig
    from litestar.openapi.plugins import SwaggerRenderPlugin
    from litestar.testing import AsyncTestClient

    @get("/ping", sync_to_thread=False)
    def ping() -> str:
        return "pong"

    config = OpenAPIConfig(title="t", version="1", path="/schema", render_plugins=[SwaggerRenderPlugin()])
    async with AsyncTestClient(app=Litestar([ping], openapi_config=config)) as client:
        body = (await client.get("/schema/swagger")).text.lower()
    assert any(marker in body for marker in CDN_MARKERS)
