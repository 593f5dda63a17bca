from __future__ import annotations

import pytest

from tests.support.http import login, token_for
from tests.support.runs import enable_code


@pytest.fixture
async def alice(client) -> dict[str, str]:
    return await token_for(client, "alice@acme.example")


@pytest.fixture
async def alice_person(client, alice) -> dict[str, str]:
    """alice herself, signed in with a session cookie (after her assistant's token was minted): a person's
    requests carry no token, so the headers to send are none."""
    await login(client, "alice@acme.example")
    return {}


@pytest.fixture
async def acme_on(demo_db: str) -> None:
    await enable_code()
