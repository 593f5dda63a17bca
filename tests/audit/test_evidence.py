"""A run's evidence pack: its story (code, revisions, manifest, warnings, approval with its session,
isolation, output hashes, items and who decided them) and the audit entries that prove it, whose hashes are
the lines of an audit export. Never record or output contents; only for people who may see the run."""

from __future__ import annotations

import json

import pytest

from tests.support.audit import SECRET_EXCERPT, SECRET_STDOUT, SECRET_VALUE, _run
from tests.support.http import login


async def test_the_pack_tells_the_story_without_contents_and_its_hashes_are_the_exports(client) -> None:
    run = await _run(client)
    await login(client, "alice@acme.example")
    response = await client.get(f"/api/runs/{run['id']}/evidence")
    assert response.status_code == 200, response.text
    pack = response.json()
    assert pack["run"]["code"] == "print('v2')"
    assert [r["code"] for r in pack["revisions"]] == ["print('v1')", "print('v2')"]
    assert pack["revisions"][1]["diff"] and "+print('v2')" in pack["revisions"][1]["diff"]
    assert pack["manifest"]["bundle_sha256"] == run["bundle_sha256"] and pack["manifest"]["files"]
    assert pack["warnings_at_approval"][0]["severity"] == "high"
    approval = pack["approval"]
    assert approval["by"] == "alice@acme.example" and approval["code_sha256"] == run["code_sha256"]
    assert approval["recorded"]["auth"] == "session" and approval["recorded"]["session_id"]
    assert (
        pack["isolation"]["vm"] == {"virt_type": "kvm", "nics": 0}
        and pack["isolation"]["host_id"] == "host-a"
    )
    assert pack["outputs"] == [{"name": "chart.png", "size": 123, "sha256": "ab" * 32}]
    assert pack["action_items"][0]["decided_by"] == "alice@acme.example"
    actions = [e["action"] for e in pack["audit_entries"]]
    assert "run.approved" in actions and "action.accepted" in actions
    accepted = next(e for e in pack["audit_entries"] if e["action"] == "action.accepted")
    assert accepted["data_withheld"] == ["changes"]
    # no record contents, no output contents, no staged excerpt: in the JSON nor in the page
    page = await client.get(f"/api/runs/{run['id']}/evidence/html")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert (
        "<script" not in page.text and "Evidence pack" in page.text and "print(&#x27;v2&#x27;)" in page.text
    )
    for text in (response.text, page.text):
        for secret in (SECRET_STDOUT, SECRET_VALUE, SECRET_EXCERPT):
            assert secret not in text
    # the pack's entry hashes are lines of the company's audit export
    client.cookies.clear()
    await login(client, "admin@acme.example")
    exported = await client.get("/api/audit/export")
    lines = {json.loads(x).get("company_seq"): json.loads(x) for x in exported.text.splitlines()[1:-1]}
    for entry in pack["audit_entries"]:
        assert lines[entry["seq"]]["hash"] == entry["hash"]
        assert "prev_hash" not in entry  # another company's entry's hash (D-L6)
    assert (await client.get(f"/api/runs/{run['id']}/evidence")).status_code == 200  # an admin sees it


@pytest.mark.sqlite  # who may read the pack, the app's (the pack read back on both engines: the test above)
async def test_only_people_who_may_see_the_run_get_its_pack(client) -> None:
    run = await _run(client)
    for email in ("bob@acme.example", "admin@globex.example"):
        client.cookies.clear()
        await login(client, email)
        for suffix in ("evidence", "evidence/html"):
            refused = await client.get(f"/api/runs/{run['id']}/{suffix}")
            assert refused.status_code == 404, (email, suffix, refused.text)
            assert SECRET_STDOUT not in refused.text
    client.cookies.clear()
    await login(client, "alice@acme.example")  # positive control: the requester gets it
    assert (await client.get(f"/api/runs/{run['id']}/evidence/html")).status_code == 200
