from __future__ import annotations

import pytest

from backend import sandbox
from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Team, TeamMembership, User
from tests.support.flows import acme_id, host_vm
from tests.support.runs import enable_code


@pytest.fixture
async def hannah_in_east(demo_db: str) -> None:
    """Code execution on; hannah (HR) also a member of team East, which maria (no HR) manages. The seed
    gives hannah no manager (she manages the People team alone), so no one but an admin would otherwise
    see her private files; as her manager, maria does."""
    await enable_code()
    east = await Team.select(Team.id).where((Team.name == "East") & (Team.company == await acme_id())).first()
    hannah = await User.select(User.id).where(User.email == "hannah@acme.example").first()
    await TeamMembership(team=east["id"], user=hannah["id"], is_manager=False).save()
    maria = await load_user_context_by_email("maria@acme.example")
    hannah_ctx = await load_user_context_by_email("hannah@acme.example")
    assert hannah_ctx.user_id in maria.managed_user_ids and not maria.can("employees")
    assert hannah_ctx.can("employees") and maria.can("products") and hannah_ctx.can("products")


@pytest.fixture
async def hannah_under_maria(hannah_in_east: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """hannah (HR) in team East under maria (no HR), and the VM stand-in in place (the flow tests here and the
    fleet's flow results read it)."""
    monkeypatch.setattr(sandbox, "run_code", host_vm)
