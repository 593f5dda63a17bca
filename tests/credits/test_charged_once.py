"""A run is charged once: a fleet host whose result post met an API that stopped after charging it posts the
result again, and the second charge returns the first instead of adding one (the short fleet soak's kill_api
fault found a run charged twice)."""

from __future__ import annotations

import pytest

from backend.credits import service as credits
from backend.credits.tables import CreditCharge


async def _charge(run_id: int, seconds: float) -> float:
    return await credits.charge(
        company_id=1, user_id=1, run_id=run_id, run_title="t", vcpus=1, memory_mib=512, seconds=seconds,
        actor=f"worker:run-{run_id}",
    )  # fmt: skip


# one charge after another, the app's; the same under a race on PostgreSQL: the two-at-once tests below
@pytest.mark.sqlite
async def test_a_run_charged_again_keeps_its_first_charge(demo_db: str) -> None:
    first = await _charge(9001, 30.0)
    again = await _charge(9001, 300.0)  # a longer time the second time: must not replace or add
    assert again == first
    rows = await CreditCharge.select(CreditCharge.credits).where(CreditCharge.run_id == 9001)
    assert [r["credits"] for r in rows] == [first]


@pytest.mark.sqlite  # the control of the test above, on the same engine
async def test_positive_control_another_run_is_charged(demo_db: str) -> None:
    await _charge(9001, 30.0)
    await _charge(9002, 30.0)
    assert await CreditCharge.count().where(CreditCharge.run_id.is_in([9001, 9002])) == 2


async def test_two_posts_of_one_result_at_once_charge_it_once_with_its_audit_entry(demo_db: str) -> None:
    """The hostile timing: a host's retried result post arriving while the first is still charging. Both
    read "not charged yet" unless the read and the insert are one serialized step."""
    import asyncio

    from backend.audit.tables import AuditEntry

    first, again = await asyncio.gather(_charge(9003, 30.0), _charge(9003, 300.0))
    assert first == again
    assert await CreditCharge.count().where(CreditCharge.run_id == 9003) == 1
    entries = await AuditEntry.count().where(
        (AuditEntry.action == "credits.charged") & (AuditEntry.subject_id == "9003")
    )
    assert entries == 1  # the charge and its entry land together, once


async def test_positive_control_two_runs_charged_at_once_are_both_charged(demo_db: str) -> None:
    import asyncio

    await asyncio.gather(_charge(9004, 30.0), _charge(9005, 30.0))
    assert await CreditCharge.count().where(CreditCharge.run_id.is_in([9004, 9005])) == 2
