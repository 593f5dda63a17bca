"""The audit trail names a caller one way, `UserContext.actor`: a person by their e-mail, an assistant by
its person's e-mail and its token, whatever it did (proposed, revised, rejected, …)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend.audit.tables import AuditEntry
from backend.runs.tables import Run
from tests.support.runs import as_user, proposal

BACKEND = Path(__file__).resolve().parents[2] / "backend"
# an audit actor spelled by hand from the caller's e-mail (ctx.actor is the one spelling), or a worker's
# (audit.run_actor and audit.host_actor are)
HAND_SPELLED = re.compile(r"""actor=[^,\n]*\bctx\.email\b|["'](assistant|worker):\{|["']worker:run-\{""")
WHERE_SPELLED = {"tenancy/context.py", "audit/service.py"}


async def _actors(run_ids: list[int]) -> dict[str, str]:
    rows = await AuditEntry.select(AuditEntry.action, AuditEntry.actor).where(
        AuditEntry.subject_type == "run", AuditEntry.subject_id.is_in([str(i) for i in run_ids])
    )
    return {r["action"]: r["actor"] for r in rows}


@pytest.mark.sqlite  # the name is UserContext.actor's spelling, not an engine's (appends on PostgreSQL: test_audit_batching)
async def test_a_token_and_a_person_are_named_the_same_way_on_every_entry(client, alice, acme_on) -> None:
    run = (await client.post("/api/runs", json=proposal(code="print(1)\n"), headers=alice)).json()
    await Run.update({Run.status: "failed"}).where(Run.id == run["id"])
    r = await client.post(f"/api/runs/{run['id']}/revisions", headers=alice, json={"code": "print(2)\n"})
    assert r.status_code == 201, r.text
    revised = r.json()
    await as_user(client, "alice@acme.example")
    assert (await client.post(f"/api/runs/{revised['id']}/reject", json={"reason": "no"})).status_code == 200
    actors = await _actors([run["id"], revised["id"]])
    assert re.fullmatch(r"assistant:alice@acme\.example \(token \d+\)", actors["run.proposed"]), actors
    assert actors["run.revised"] == actors["run.proposed"]  # the same token, the same name
    assert actors["run.rejected"] == "alice@acme.example"  # a person, signed in


def test_no_audit_actor_is_spelled_by_hand() -> None:
    found = [
        f"{path.relative_to(BACKEND.parent)}:{n}"
        for path in sorted(BACKEND.rglob("*.py"))
        if str(path.relative_to(BACKEND)) not in WHERE_SPELLED  # where the spellings are defined
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if HAND_SPELLED.search(line)
    ]
    assert not found, found
    # control: the spellings ctx.actor replaced are caught
    assert HAND_SPELLED.search("        actor=ctx.email,")
    assert HAND_SPELLED.search('    actor = actor or f"assistant:{ctx.email}"')
    assert HAND_SPELLED.search("        actor=audit_actor or ctx.email,")
    assert HAND_SPELLED.search("""        actor=f"worker:run-{run['id']}",""")
    assert HAND_SPELLED.search('        actor=f"worker:{host_id}",')
    assert not HAND_SPELLED.search("        actor=ctx.actor,")
    assert not HAND_SPELLED.search('        actor=audit.run_actor(run["id"]),')
