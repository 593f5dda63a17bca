"""The run history: filtered, counted and paged by the database, newest first, without the runs' code."""

from __future__ import annotations

import pytest

from tests.support.runs import as_user, proposal

SNEAKY = 'access = "user"  # \u202e } \u2066if admin:\u2069 \u2066 begin admins only\nprint(access)\n'


async def _propose(client, headers, index: int, datasets: list[str], code: str | None = None) -> dict:
    body = proposal(code=code or f"print({index})", datasets=datasets, title=f"run {index}")
    r = await client.post("/api/runs", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def _ids(client, headers, **params) -> tuple[list[int], int]:
    r = await client.get("/api/runs", params=params, headers=headers)
    assert r.status_code == 200, r.text
    body = r.json()
    return [run["id"] for run in body["items"]], body["total"]


async def test_the_run_list_filters_and_pages_in_the_database(client, alice, acme_on) -> None:
    scopes = [["deals"], ["tasks"], ["deals", "tasks"], ["tasks"]]
    made = [(await _propose(client, alice, i, datasets))["id"] for i, datasets in enumerate(scopes)]
    newest_first = made[::-1]
    assert await _ids(client, alice) == (newest_first, 4)
    assert await _ids(client, alice, limit=2) == (newest_first[:2], 4)
    assert await _ids(client, alice, limit=2, offset=2) == (newest_first[2:], 4)
    assert await _ids(client, alice, dataset="deals") == ([made[2], made[0]], 2)
    assert await _ids(client, alice, dataset="tasks", limit=1, offset=1) == ([made[2]], 3)
    # a dataset is matched whole: neither a part of a name nor a LIKE wildcard matches
    for pattern in ("deal", "eals", "%", "_eals", '"'):
        assert await _ids(client, alice, dataset=pattern) == ([], 0), pattern
    assert await _ids(client, alice, status="awaiting_approval", dataset="deals") == ([made[2], made[0]], 2)
    assert await _ids(client, alice, status="queued") == ([], 0)


# which fields the list shows, the app's (the list's filters and pages on both engines: the test above)
@pytest.mark.sqlite
async def test_the_list_shows_summaries_not_code(client, alice, acme_on) -> None:
    sneaky = await _propose(client, alice, 0, ["deals"], code=SNEAKY)
    plain = await _propose(client, alice, 1, ["deals"])
    items = (await client.get("/api/runs", headers=alice)).json()["items"]
    assert [i["id"] for i in items] == [plain["id"], sneaky["id"]]
    for item in items:
        assert not {"code", "plan", "manifest", "result", "findings"} & set(item), sorted(item)
    assert items[1]["findings_count"] == len(sneaky["findings"]) > 0
    assert items[0]["findings_count"] == len(plain["findings"])


@pytest.mark.sqlite  # the person's filter beside those of the test above, which runs on both engines
async def test_an_admin_filters_by_person(client, alice, acme_on) -> None:
    mine = (await _propose(client, alice, 0, ["deals"]))["id"]
    await as_user(client, "admin@acme.example")
    everyone, total = await _ids(client, {})
    assert mine in everyone and total == len(everyone) > 1  # the demo's waiting run of maria's, too
    assert await _ids(client, {}, user="ALICE@acme.example ") == ([mine], 1)
    assert await _ids(client, {}, user="nobody@acme.example") == ([], 0)
