"""Speaking to the API as its callers do: signing in, a personal API token, approving a run or deciding an item as a
person, and the Origin the console sends."""

from __future__ import annotations

from typing import Any

from backend.audit.tables import AuditEntry
from backend.settings import get_settings  # noqa: E402
from backend.tenancy.auth import ASSISTANT_SCOPE
from backend.tenancy.tables import Company


def console_origin() -> str:
    """The Origin the API trusts for cookie-signed changes: the console's."""
    from backend.tenancy.origin import origin_of

    return origin_of(get_settings().effective_console_url) or ""


async def login(client: object, email: str, password: str = "demo") -> dict:
    response = await client.post("/api/auth/login", json={"email": email, "password": password})  # type: ignore[attr-defined]
    assert response.status_code == 200, response.text
    return response.json()


async def token_for(client: object, email: str) -> dict[str, str]:
    """Headers carrying a fresh personal API token of `email` (as the assistant would hold)."""
    await login(client, email)
    response = await client.post("/api/me/tokens", json={"name": "assistant"})  # type: ignore[attr-defined]
    assert response.status_code == 201, response.text
    client.cookies.clear()  # type: ignore[attr-defined]
    return {"Authorization": f"Bearer {response.json()['token']}"}


async def approve_as(client: object, email: str, run: dict | int, **body: object) -> object:
    """A person approves the way the console does: signed in (a session cookie, no token) and sending the
    hashes of the code and staged data shown on the approval screen (`run` is the proposal's JSON, or an
    id to read it as that person). Leaves the client signed in as `email`."""
    await login(client, email)
    if isinstance(run, int):
        run = (await client.get(f"/api/runs/{run}")).json()  # type: ignore[attr-defined]
    hashes = {"code_sha256": run.get("code_sha256"), "bundle_sha256": run.get("bundle_sha256")}
    return await client.post(f"/api/runs/{run['id']}/approve", json={**hashes, **body})  # type: ignore[attr-defined]


async def decide_item_as(
    client: object, email: str, item_id: int, decision: str = "accept", **kwargs: object
) -> object:
    """A person accepts or rejects one proposed change, signed in. Leaves the client signed in as `email`."""
    await login(client, email)
    return await client.post(f"/api/action-items/{item_id}/{decision}", **kwargs)  # type: ignore[attr-defined]


ALICE = "alice@acme.example"


async def _token(client: Any, email: str) -> tuple[dict[str, str], int]:
    """Mint a token as the person would (signed in), then forget the session: the assistant holds only this."""
    await login(client, email)
    r = await client.post("/api/me/tokens", json={"name": "assistant"})
    assert r.status_code == 201, r.text
    client.cookies.clear()
    body = r.json()
    assert body["scope"] == ASSISTANT_SCOPE
    return {"Authorization": f"Bearer {body['token']}"}, body["id"]


async def _enable(**extra: Any) -> None:
    values = {Company.code_execution_enabled: True}
    values.update({getattr(Company, k): v for k, v in extra.items()})
    await Company.update(values).where(Company.name == "Acme Analytics")


async def _refused(r: Any, token_id: int) -> None:
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "person_required"
    entry = (
        await AuditEntry.select()
        .where(AuditEntry.action == "auth.person_required")
        .order_by(AuditEntry.seq, ascending=False)
        .output(load_json=True)
        .first()
    )
    assert entry is not None and entry["data"]["token_id"] == token_id
    assert entry["subject_type"] == "api_token" and entry["subject_id"] == str(token_id)
