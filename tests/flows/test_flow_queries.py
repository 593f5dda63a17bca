"""How many SQL queries one load of a flow's page costs (GET /api/flows/{id}, what the console polls every
2 s): the flow's shared data (its company, credits, requester) is read once per flow, so a flow of five
steps costs what a flow of two does, give or take nothing. Counted by wrapping the engine's one entry for
every query (`run_querystring`), authentication included."""

from __future__ import annotations

from typing import Any

import pytest

from backend.tenancy.tables import Company
from tests.support.flows import flow_body, step
from tests.support.http import login
from tests.support.queries import counted

pytestmark = pytest.mark.usefixtures("acme_on")


async def _page_load(client: Any, alice: dict[str, str], monkeypatch: pytest.MonkeyPatch, steps: int) -> int:
    """Propose a flow of `steps` steps as alice's assistant; count one load of its page by alice."""
    body = flow_body(*[step(title=f"Step {k}") for k in range(1, steps + 1)])
    client.cookies.clear()
    proposed = await client.post("/api/flows", json=body, headers=alice)
    assert proposed.status_code == 201, proposed.text
    flow_id = proposed.json()["id"]
    await login(client, "alice@acme.example")
    with counted(monkeypatch) as queries:
        r = await client.get(f"/api/flows/{flow_id}")
    assert r.status_code == 200 and len(r.json()["steps"]) == steps, r.text
    return len(queries)


async def test_a_flow_page_reads_shared_data_once_per_flow_not_once_per_step(
    client, alice, monkeypatch
) -> None:
    two = await _page_load(client, alice, monkeypatch, 2)
    five = await _page_load(client, alice, monkeypatch, 5)
    print(f"queries of one flow page load: 2 steps {two}, 5 steps {five}")
    assert five == two, (two, five)


async def test_the_counter_counts_a_query(client, monkeypatch) -> None:
    """Positive control: a query run inside the block is counted, one outside is not."""
    with counted(monkeypatch) as queries:
        await Company.count()
    await Company.count()
    assert len(queries) == 1
