from collections.abc import AsyncIterator

import pytest

from backend.settings import get_settings
from tests.conftest import console_origin
from tests.runs.conftest import acme_on, alice  # noqa: F401 - the runs' fixtures, for the fleet's tests


@pytest.fixture
async def client(demo_db: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[object]:
    """The real app as a fleet's API process runs it (`workers=fleet`: /api/worker is mounted), without
    its start-up hooks (no dispatcher: the tests dispatch when they mean to)."""
    from litestar.testing import AsyncTestClient

    from backend.app import create_app

    monkeypatch.setenv("CLEANROOM_WORKERS", "fleet")
    get_settings.cache_clear()
    try:
        app = create_app(database_url=demo_db, run_hooks=False, pool=False)
        async with AsyncTestClient(app=app) as test_client:
            test_client.headers["origin"] = console_origin()
            yield test_client
    finally:
        monkeypatch.delenv("CLEANROOM_WORKERS")
        get_settings.cache_clear()
