"""Who sees which rows: the one visibility rule, through the API and the CLI service."""

from __future__ import annotations

import pytest

from backend.records import service
from backend.records.datasets import DATASETS
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import User
from tests.support.http import login


async def _all(email: str, dataset: str) -> list[dict]:
    ctx = await load_user_context_by_email(email)
    page = await service.list_records(ctx, dataset, page_size=500)
    items = list(page.items)
    n = 2
    while len(items) < page.total:
        items += (await service.list_records(ctx, dataset, page=n, page_size=500)).items
        n += 1
    return items


async def _uid(email: str) -> int:
    return (await User.select(User.id).where(User.email == email).first())["id"]


async def test_bob_sees_no_private_or_east_team_deal_of_alice(demo_db: str) -> None:
    alice = await _uid("alice@acme.example")
    alices_all = [d for d in await _all("admin@acme.example", "deals") if d["owner_id"] == alice]
    assert {d["visibility"] for d in alices_all} == {"private", "team", "company"}  # the data can show a leak
    bob_sees = [d for d in await _all("bob@acme.example", "deals") if d["owner_id"] == alice]
    assert bob_sees, "bob should still see alice's company-wide deals"
    assert {d["visibility"] for d in bob_sees} == {"company"}


async def test_east_manager_sees_all_of_alices_deals(demo_db: str) -> None:
    alice = await _uid("alice@acme.example")
    alices_all = {d["id"] for d in await _all("admin@acme.example", "deals") if d["owner_id"] == alice}
    maria_sees = {d["id"] for d in await _all("maria@acme.example", "deals") if d["owner_id"] == alice}
    assert maria_sees == alices_all


async def test_member_sees_own_private_rows_but_not_a_peers(demo_db: str) -> None:
    bob = await _uid("bob@acme.example")
    bobs = await _all("bob@acme.example", "tasks")
    assert any(t["visibility"] == "private" and t["owner_id"] == bob for t in bobs)
    assert all(t["owner_id"] == bob for t in bobs if t["visibility"] == "private")


@pytest.mark.sqlite  # an admin's count, no rule applied (the rule on PostgreSQL: the tests above)
async def test_admin_sees_more_than_5000_tasks(demo_db: str) -> None:
    ctx = await load_user_context_by_email("admin@acme.example")
    page = await service.list_records(ctx, "tasks", page_size=1)
    assert page.total > 5000


async def test_no_row_of_another_company_is_ever_listed(demo_db: str) -> None:
    acme_admin = await load_user_context_by_email("admin@acme.example")
    for name in DATASETS:
        for row in (await service.list_records(acme_admin, name, page_size=500)).items:
            assert (
                await DATASETS[name]
                .table.exists()
                .where(
                    (DATASETS[name].table.id == row["id"])
                    & (DATASETS[name].table.company == acme_admin.company_id)
                )
            )


@pytest.mark.sqlite  # the permission check raises before any SQL, not an engine's
@pytest.mark.parametrize("email", ["bob@acme.example", "frank@acme.example", "maria@acme.example"])
async def test_employees_need_the_hr_permission(demo_db: str, email: str) -> None:
    from backend.errors import Forbidden

    ctx = await load_user_context_by_email(email)
    with pytest.raises(Forbidden, match="no permission to read employees"):
        await service.list_records(ctx, "employees")
    hannah = await load_user_context_by_email("hannah@acme.example")
    assert (await service.list_records(hannah, "employees")).total > 0


async def test_api_lists_with_paging_sorting_and_filters(client) -> None:
    await login(client, "maria@acme.example")
    r = await client.get("/api/records/deals", params={"page_size": 5, "sort": "-amount", "stage": "won"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["items"]) == 5 and body["total"] > 5
    amounts = [float(i["amount"]) for i in body["items"]]
    assert amounts == sorted(amounts, reverse=True)
    assert {i["stage"] for i in body["items"]} == {"won"}
    r2 = await client.get(
        "/api/records/deals", params={"page_size": 5, "page": 2, "sort": "-amount", "stage": "won"}
    )
    assert not {i["id"] for i in r2.json()["items"]} & {i["id"] for i in body["items"]}


@pytest.mark.sqlite  # the permission check raises before any SQL, not an engine's
async def test_api_refuses_employees_without_hr(client) -> None:
    await login(client, "bob@acme.example")
    r = await client.get("/api/records/employees")
    assert r.status_code == 403
    assert r.json()["error"] == "dataset_forbidden"
    assert "employees" in r.json()["detail"]


@pytest.mark.sqlite  # the detail's where clause is the list's, which runs on both engines above
async def test_record_of_another_company_answers_404(client) -> None:
    from backend.records.tables import Deal
    from backend.tenancy.tables import Company

    globex = (await Company.select(Company.id).where(Company.name == "Globex").first())["id"]
    foreign = (await Deal.select(Deal.id).where(Deal.company == globex).first())["id"]
    await login(client, "admin@acme.example")
    r = await client.get(f"/api/records/deals/{foreign}")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    own = (await client.get("/api/records/deals", params={"page_size": 1})).json()["items"][0]["id"]
    assert (await client.get(f"/api/records/deals/{own}")).status_code == 200  # positive control


@pytest.mark.sqlite  # the detail's where clause is the list's, which runs on both engines above
async def test_invisible_record_of_own_company_answers_404(client) -> None:
    alice = await _uid("alice@acme.example")
    private = [
        d
        for d in await _all("admin@acme.example", "deals")
        if d["owner_id"] == alice and d["visibility"] == "private"
    ]
    await login(client, "bob@acme.example")
    assert (await client.get(f"/api/records/deals/{private[0]['id']}")).status_code == 404
