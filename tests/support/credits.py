"""A company's credit pool set to cover exactly one run, and what remains (the no-overdraft tests)."""

from __future__ import annotations

import math
from typing import Any

from backend.credits import service as credits
from backend.tenancy.tables import Company
from tests.support.http import login

LIMITS = {"wall_seconds": 100, "vcpus": 1, "memory_mib": 1024}


MAX_COST = credits.price(1, 1024, 100)[0]  # 1 + 0.02 × 100 vCPU-s + 0.01 × 100 GiB-s = 4.00


async def _acme() -> int:
    return (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]


async def _pool_covering(runs_covered: int) -> int:
    """Set the pool so that what is left covers exactly `runs_covered` runs at their maximum cost (the seed
    has charged some of it this month already: that much more, rounded up, less than one run's worth)."""
    acme = await _acme()
    total = math.ceil(await credits.used(acme)) + int(runs_covered * MAX_COST)
    await Company.update({Company.credit_pool: total}).where(Company.id == acme)
    _, _, left = await credits.balance(acme)
    assert runs_covered * MAX_COST <= left < (runs_covered + 1) * MAX_COST
    return total


async def _remaining(client: Any) -> dict[str, Any]:
    client.cookies.clear()
    await login(client, "admin@acme.example")
    usage = (await client.get("/api/credits")).json()
    client.cookies.clear()
    return usage
