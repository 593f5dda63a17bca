from collections.abc import AsyncIterator

import pytest

from backend.settings import get_settings
from tests.support.databases import _shared_app
from tests.support.http import console_origin


@pytest.fixture
async def client(demo_db: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[object]:
    """The real app as a fleet's API process runs it (`workers=fleet`: /api/worker is mounted), without
    its start-up hooks (no dispatcher: the tests dispatch when they mean to): the process's shared app of
    fleet mode (`_shared_app`), its requests through its own pool."""
    from litestar.testing import AsyncTestClient

    monkeypatch.setenv("CLEANROOM_WORKERS", "fleet")
    get_settings.cache_clear()
    try:
        app = _shared_app(demo_db)
        async with AsyncTestClient(app=app) as test_client:
            test_client.headers["origin"] = console_origin()
            yield test_client
    finally:
        monkeypatch.delenv("CLEANROOM_WORKERS")
        get_settings.cache_clear()
