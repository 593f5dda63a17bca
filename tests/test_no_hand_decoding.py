"""No page or tool of the console, the MCP server or the fleet host agent decodes API JSON by hand: each reads
the API through `backend/client` (`CleanroomClient`, `decode`, `refusal_of`) and gets the backend's own
pydantic schemas back, read by attribute.

Hand-decoding, as this test defines it (one regular expression per form, matched line by line, comments left
out):

- `body-json`   a response's body parsed outside the client: `.json()` or `json.loads(<x>.text / .content)`;
- `awaited-lookup`  a key looked up on what an awaited call answered: `(await x.y(...))[...]` / `.get(`;
- `raw-api-path`    a request to an `/api/...` path made with a generic `get`/`post`/`request` helper, whose
                    answer is untyped JSON, instead of the client's typed method for that endpoint. The fleet
                    host agent speaks the worker API (`/api/worker/...`, whose schemas live in
                    `backend/fleet/schemas.py`) through its own typed client, `HostClient` on `ApiClient`
                    (`backend/fleet/host_client.py`): all three forms hold for both files.

Benchmarks (`bench.py`) are measurement harnesses, not pages or tools (issue 26 item 5 moves them out of these
packages), and are not scanned. A positive control plants each form and shows the scan finds it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PATTERNS = {
    "body-json": re.compile(r"\.json\(\)|json\.loads\([^)]*\.(?:text|content)\b"),
    "awaited-lookup": re.compile(r"\(await [^()]*\([^()]*\)\)\s*(?:\[|\.get\()"),
    "raw-api-path": re.compile(
        r"\.(?:get|post|put|patch|delete|request)\(\s*(?:\"[A-Z]+\",\s*)?f?[\"']/api/"
    ),
}
# the fleet host agent and its typed client of the worker API
HOST_AGENT = "backend/fleet/host_agent.py"
HOST_CLIENT = "backend/fleet/host_client.py"


def scanned() -> list[Path]:
    files = [*sorted((ROOT / "console").rglob("*.py")), *sorted((ROOT / "backend" / "mcp").rglob("*.py"))]
    # missing, the test fails reading them: a rename must update this
    files += [ROOT / HOST_AGENT, ROOT / HOST_CLIENT]
    return [f for f in files if f.name != "bench.py"]


def hand_decoding(path: Path) -> list[str]:
    """Each line of `path` that decodes API JSON by hand, as "path:line: form: text"."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        code = line.split("#", 1)[0]
        for form, pattern in PATTERNS.items():
            if pattern.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {form}: {line.strip()}")
    return found


def test_console_mcp_and_the_fleet_host_agent_decode_no_api_json_by_hand() -> None:
    files = scanned()
    names = {str(f.relative_to(ROOT)) for f in files}
    # what the scan must cover: the console's client and pages, the MCP tools, the host agent
    assert {"console/api.py", "console/pages/run_detail.py", "console/pages/flows.py"} <= names
    assert {"backend/mcp/api.py", "backend/mcp/tools/runs.py", "backend/mcp/tools/flows.py"} <= names
    assert {HOST_AGENT, HOST_CLIENT} <= names
    found = [hit for f in files for hit in hand_decoding(f)]
    assert not found, "API JSON decoded by hand (use backend.client and the schemas):\n" + "\n".join(found)


PLANTED = """
async def page(api, response, client):
    run = response.json()["status"]
    body = json.loads(response.text)
    status = (await api.run(3))["status"]
    title = (await api.flow(4)).get("title")
    raw = await client.get(f"/api/runs/{run}")
    other = await client.request("POST", "/api/flows", json={})
"""
CLEAN = """
async def page(api, response):
    run = await api.run(3)
    job = decode(Job, response)
    detail = refusal_of(response).detail
    rows = [r.model_dump(mode="json") for r in await api.audit_report("schedules")]
    table.on("rowClick", lambda e: ui.navigate.to(f"/runs/{e.args[1]['id']}"))  # a browser event, not the API
"""


def test_the_scan_finds_each_planted_form_and_nothing_in_typed_code(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        hits = hand_decoding(planted)
        clean = tmp_path / "clean.py"
        clean.write_text(CLEAN)
        assert hand_decoding(clean) == []
    finally:
        ROOT = saved
    forms = [hit.split(": ")[1] for hit in hits]
    assert forms == [
        "body-json",
        "body-json",
        "awaited-lookup",
        "awaited-lookup",
        "raw-api-path",
        "raw-api-path",
    ]
