from __future__ import annotations

from typing import Any

from tests.conftest import login
from tests.runs.conftest import acme_on, alice, alice_person  # noqa: F401 - fixtures for these tests


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
