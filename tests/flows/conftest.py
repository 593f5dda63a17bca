from __future__ import annotations

from typing import Any

import pytest

from backend.tenancy.context import load_user_context_by_email
from backend.tenancy.tables import Team, TeamMembership, User
from tests.conftest import login
from tests.runs.conftest import acme_on, alice, alice_person, enable_code  # noqa: F401 - fixtures for these tests


def step(code: str = "print('step')", datasets: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "title": extra.pop("title", "A step"),
        "code": code,
        "datasets": ["deals"] if datasets is None else datasets,
        "files": extra.pop("files", []),
        "capability": extra.pop("capability", "read"),
        **extra,
    }


def flow_body(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "conversation_id": extra.pop("conversation_id", "conv-flow"),
        "title": extra.pop("title", "Pipeline review"),
        "plan": extra.pop("plan", "Look at the pipeline in steps."),
        "steps": list(steps),
        **extra,
    }


def hashes(flow: dict[str, Any]) -> dict[str, Any]:
    """What the approval screen sends: every step's code and bundle hashes, in order."""
    return {
        "steps": [
            {"code_sha256": s["run"]["code_sha256"], "bundle_sha256": s["run"]["bundle_sha256"]}
            for s in flow["steps"]
        ]
    }


async def approve_flow_as(client: Any, email: str, flow: dict[str, Any], **override: Any) -> Any:
    """A person approves the flow the way the console does: signed in, with every step's hashes."""
    await login(client, email)
    return await client.post(f"/api/flows/{flow['id']}/approve", json={**hashes(flow), **override})


async def acme_id() -> int:
    return (await User.select(User.company).where(User.email == "admin@acme.example").first())["company"]


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
