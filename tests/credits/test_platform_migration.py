"""Platform charges and credentials made before D-L4 (issue 52) keep what they meant after the migrations:
a charge's idempotency key is still its key, now its credential's own (the same key from that credential is
still a replay, not a second charge); a credential made before scopes charges nobody until the operator
names its companies (the hostile case: a leaked global credential does not stay global by default)."""

from __future__ import annotations

import pytest

from backend import db
from backend.credits import platform
from backend.credits.tables import PlatformCharge, PlatformToken
from backend.errors import Forbidden
from tests.runs.test_run_migrations import bare  # noqa: F401 - a fixture
from tests.support.migrations import T0, _acme_and_alice, _migrate, _sql

BEFORE = "2026-12-03T11:00:01:000000"  # the last migration before credentials were scoped


async def test_a_charge_and_a_credential_from_before_keep_their_meaning(bare: str) -> None:  # noqa: F811
    db.configure(bare)
    await _migrate(BEFORE)
    await _acme_and_alice()
    await _sql(
        "INSERT INTO platform_token (name, prefix, token_hash, created_at, created_by, revoked) "
        "VALUES ('chat', 'cpt_old', {}, {}, 'cli:old', false)",
        "h" * 64,
        T0,
    )
    await _sql(
        'INSERT INTO platform_charge (company, "user", kind, credits, idempotency_key, token_id, left_after, at) '
        "VALUES (1, 1, 'chat_turn', 2.5, 'turn-1', 1, 7.5, {})",
        T0,
    )
    await _migrate("all")

    charge = await PlatformCharge.select().first()
    assert charge["idempotency_key"] == "turn-1"
    assert charge["token_key"] == platform.token_key(1, "turn-1")
    token = await PlatformToken.select().where(PlatformToken.id == 1).first()
    assert token["all_companies"] is False
    with pytest.raises(Forbidden, match="cleanroom platform token scope 1"):  # global before: nobody now
        await platform.charge(token, company="Acme", user=1, kind="chat_turn", amount=2.5, key="turn-2")

    await platform.scope_token(1, actor="cli:test", companies=["Acme"])  # control: the operator's choice
    token = await PlatformToken.select().where(PlatformToken.id == 1).first()
    answer, replayed = await platform.charge(
        token, company="Acme", user=1, kind="chat_turn", amount=2.5, key="turn-1"
    )
    assert replayed and answer["id"] == charge["id"]  # the key from before is still this credential's
    answer, replayed = await platform.charge(
        token, company="Acme", user=1, kind="chat_turn", amount=2.5, key="turn-2"
    )
    assert not replayed and await PlatformCharge.count() == 2
