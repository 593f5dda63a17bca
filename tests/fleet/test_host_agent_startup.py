"""A fleet host's agent is a client and nothing else: importing it, and taking a job with it, loads no Piccolo,
no Litestar, no table and no service of the API. A hypervisor host holds no credential that reads a company's
data; it should not hold the code that does either. Each probe is a fresh interpreter (this test process has
long imported all of them) that reports what it loaded, as tests/cli/test_cli_startup.py does for the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY_PACKAGES = ("piccolo", "litestar", "nicegui")

PROBE = """
import json, sys
{code}
heavy = {heavy!r}
print(json.dumps(sorted(
    m for m in sys.modules
    if m.split(".")[0] in heavy
    or (m.startswith("backend.") and m.rsplit(".", 1)[-1] in ("tables", "service", "db", "app"))
)))
"""

# The agent as its process has it: the module, an agent, and one job taken end to end against a stand-in
# API (claimed, its bundle fetched and checked against the approval, refused: the bundle is not the approved
# one), so what its functions import when they run is counted too.
TAKE_A_JOB = """
import asyncio, io, tarfile, httpx, tempfile, os
os.environ["CLEANROOM_DATA_DIR"] = tempfile.mkdtemp()
from backend.fleet.host_agent import HostAgent
calls = []
job = {"run_id": 7, "code": "print(1)", "code_sha256": "c", "approved_code_sha256": "c",
       "approved_bundle_sha256": "b", "approved_at": "2026-12-06T00:00:00Z", "manifest": {}, "limits": {},
       "read_actions": True, "bundle_url": "/api/v1/worker/runs/7/bundle?sig=x",
       "result_url": "/api/v1/worker/runs/7/result?sig=x"}
def tar():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        data = b"{}"
        info = tarfile.TarInfo("manifest.json"); info.size = len(data); t.addfile(info, io.BytesIO(data))
    return out.getvalue()
def api(request):
    calls.append(request.url.path)
    if request.url.path.endswith("/claim"):
        return httpx.Response(200, json=job)
    if request.url.path.endswith("/bundle"):
        return httpx.Response(200, content=tar())
    return httpx.Response(200, json={"ok": True, "status": "error"})
agent = HostAgent(host_id="alpha", api_url="http://api.test", token="t", capacity=1,
                  http=httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(api)))
asyncio.run(agent.handle(7))
assert calls == ["/api/v1/worker/runs/7/claim", "/api/v1/worker/runs/7/bundle",
                 "/api/v1/worker/runs/7/refuse"], calls
"""


def probe(code: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code, heavy=HEAVY_PACKAGES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_host_agent_taking_a_job_loads_no_table_service_orm_or_web_framework() -> None:
    assert probe(TAKE_A_JOB) == []


def test_positive_control_the_probe_sees_the_api_side_of_the_fleet() -> None:
    """Control: the same probe, importing the fleet's API-side tables as well (the agent imported the API's
    dispatcher, and with it every table and most services, until 2026-12-06), reports them."""
    heavy = probe(TAKE_A_JOB + "import backend.fleet.tables\n")
    assert {"piccolo", "backend.fleet.tables"} <= set(heavy)
