"""What the assistant would do over the API (propose runs), and a stand-in VM for page tests that must
show a finished run without booting one (the browser tests use the real sandbox)."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from nicegui.testing.user import User

from console.api import ApiConfig
from tests.support.databases import _shared_app
from tests.support.http import console_origin

# the console as the `user` fixture builds it (NiceGUI user_simulation runs this file)
CONSOLE_APP = Path(__file__).resolve().parent / "console_app.py"

ANALYSIS_CODE = """import csv
import json

import matplotlib.pyplot as plt

deals = list(csv.DictReader(open("/work/input/datasets/deals.csv")))
by_stage = {}
for deal in deals:
    by_stage[deal["stage"]] = by_stage.get(deal["stage"], 0) + 1
print("deals per stage:", json.dumps(by_stage, sort_keys=True))

plt.bar(list(by_stage), list(by_stage.values()))
plt.title("Deals per stage")
plt.savefig("/work/output/deals_per_stage.png")

first = deals[0]
json.dump(
    [
        {"op": "update", "dataset": "deals", "record_id": int(first["id"]),
         "changes": {"stage": "negotiation"}, "reason": "the customer asked for a quote"},
        {"op": "update", "dataset": "deals", "record_id": int(first["id"]),
         "changes": {"no_such_field": 1}, "reason": "a mistake"},
    ],
    open("/work/output/actions.json", "w"),
)
"""


class Assistant:
    """Calls the real API the way the assistant (or an admin) would, over the given transport."""

    def __init__(self, transport: httpx.AsyncBaseTransport, base_url: str = "http://api.test") -> None:
        self.transport = transport
        self.base_url = base_url

    async def call(self, email: str, method: str, path: str, **kwargs: Any) -> Any:
        from tests.support.http import console_origin

        async with httpx.AsyncClient(
            transport=self.transport,
            base_url=self.base_url,
            timeout=60,
            headers={"origin": console_origin()},  # a person's session, as the console sends it
        ) as client:
            response = await client.post("/api/auth/login", json={"email": email, "password": "demo"})
            assert response.status_code == 200, response.text
            response = await client.request(method, path, **kwargs)
        assert response.status_code < 400, response.text
        return response.json() if response.content else None

    async def approve(self, email: str, run: dict[str, Any]) -> Any:
        """The person approves (a signed-in session), sending the hashes the approval screen shows."""
        hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
        return await self.call(email, "POST", f"/api/runs/{run['id']}/approve", json=hashes)

    async def enable_code_execution(self) -> None:
        await self.call(
            "admin@acme.example", "PATCH", "/api/company/settings", json={"code_execution_enabled": True}
        )

    async def empty_pool(self, company: str = "Acme Analytics") -> None:
        """The operator's plan with no credits (a company admin cannot change the pool): straight to the table."""
        from backend.tenancy.tables import Company

        await Company.update({Company.credit_pool: 0}).where(Company.name == company)

    async def feedback_file_id(self, email: str = "alice@acme.example") -> int:
        files = await self.call(email, "GET", "/api/drive/files", params={"all": "true"})
        return next(f["id"] for f in files if f["name"] == "Customer feedback.xlsx")

    async def propose(
        self,
        email: str = "alice@acme.example",
        *,
        code: str = ANALYSIS_CODE,
        with_feedback: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        body = {
            "conversation_id": "conv-console-1",
            "title": "Deals per stage",
            "plan": "Count deals per stage, draw a bar chart, and propose moving the first deal to negotiation.",
            "code": code,
            "datasets": ["deals"],
            "files": [await self.feedback_file_id(email)] if with_feedback else [],
            **extra,
        }
        return await self.call(email, "POST", "/api/runs", json=body)

    async def propose_flow(self, email: str = "alice@acme.example", **extra: Any) -> dict[str, Any]:
        return await self.call(email, "POST", "/api/flows", json=demo_flow_body(**extra))

    async def approve_flow(self, email: str, flow: dict[str, Any]) -> Any:
        return await self.call(email, "POST", f"/api/flows/{flow['id']}/approve", json=flow_hashes(flow))


def chart_png() -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (240, 160), "white")
    draw = ImageDraw.Draw(image)
    for i, height in enumerate((60, 110, 40, 90)):
        draw.rectangle([20 + i * 55, 150 - height, 60 + i * 55, 150], fill="#1f4e79")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def fake_run_code(
    code: str, *, input_dir: Path, out_dir: Path, limits: Any, read_actions: bool = True, **_: Any
):
    """Stands in for `backend.sandbox.run_code`: the outputs a real VM run of ANALYSIS_CODE produces."""
    from backend.sandbox.models import OutputFile, SandboxResult, Timings, VmInfo

    with open(input_dir / "datasets" / "deals.csv", newline="") as handle:
        first_id = int(next(csv.DictReader(handle))["id"])
    png = chart_png()
    (out_dir / "deals_per_stage.png").write_bytes(png)
    actions = [
        {
            "op": "update",
            "dataset": "deals",
            "record_id": first_id,
            "changes": {"stage": "negotiation"},
            "reason": "the customer asked for a quote",
        },
        {
            "op": "update",
            "dataset": "deals",
            "record_id": first_id,
            "changes": {"no_such_field": 1},
            "reason": "a mistake",
        },
    ]
    if "TWO CHANGES TO ONE RECORD" in code:  # the second goes stale once the first is accepted
        actions[1] = {
            "op": "update",
            "dataset": "deals",
            "record_id": first_id,
            "changes": {"probability": 55},
            "reason": "a second look",
        }
    return SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout='deals per stage: {"negotiation": 3, "proposal": 5}\n',
        files=[OutputFile(name="deals_per_stage.png", size=len(png), sha256=hashlib.sha256(png).hexdigest())],
        actions=actions if read_actions and "actions.json" in code else None,
        timings_ms=Timings(start=300, execute=900, collect=50, total=1250),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
    )


def fake_failing_run_code(code: str, **_: Any):
    from backend.sandbox.models import SandboxResult, VmInfo

    return SandboxResult(
        status="failed",
        exit_code=1,
        stderr="Traceback (most recent call last):\n  File \"main.py\", line 6\nKeyError: 'stage'\n",
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64),
    )


async def execute_with_stand_in_vm(run_id: int, monkeypatch: Any, *, fail: bool = False) -> str:
    from backend import execution, sandbox

    monkeypatch.setattr(sandbox, "run_code", fake_failing_run_code if fail else fake_run_code)
    return await execution.execute(run_id)


# --------------------------------------------------------------------------------------------------- flows

# A two-step demo flow that runs as written in a real VM (the browser test) and as the stand-in below fakes
# it: step 1 only reads and counts; step 2 gets step 1's conclusion and by_stage.csv and may propose writes.
FLOW_STEP_1 = """import csv
import json

import matplotlib.pyplot as plt

deals = list(csv.DictReader(open("/work/input/datasets/deals.csv")))
by_stage = {}
for deal in deals:
    by_stage[deal["stage"]] = by_stage.get(deal["stage"], 0) + 1
print("step 1 counted", len(deals), "deals")
with open("/work/output/by_stage.csv", "w") as out:
    out.write("stage,deals\\n" + "".join(f"{s},{n}\\n" for s, n in sorted(by_stage.items())))
plt.bar(list(by_stage), list(by_stage.values()))
plt.savefig("/work/output/flow_deals_per_stage.png")
json.dump({"deals": len(deals), "stages": len(by_stage)}, open("/work/output/conclusion.json", "w"))
"""

FLOW_STEP_2 = """import csv
import json

earlier = json.load(open("/work/flow/step-1/conclusion.json"))
stages = list(csv.DictReader(open("/work/flow/step-1/by_stage.csv")))
print("step 2 was handed", earlier["deals"], "deals in", len(stages), "stages")
first = next(csv.DictReader(open("/work/input/datasets/deals.csv")))
json.dump(
    [{"op": "update", "dataset": "deals", "record_id": int(first["id"]),
      "changes": {"stage": "negotiation"}, "reason": "the largest stage needs a push"}],
    open("/work/output/actions.json", "w"),
)
json.dump({"handed_deals": earlier["deals"], "largest_stage": max(stages, key=lambda s: int(s["deals"]))["stage"]},
          open("/work/output/conclusion.json", "w"))
"""


def demo_flow_body(**extra: Any) -> dict[str, Any]:
    """POST /api/flows: the demo flow; `steps` items may be overridden by index via `step_1`/`step_2`."""
    steps = [
        {"title": "Count deals per stage", "code": FLOW_STEP_1, "datasets": ["deals"], "capability": "read"},
        {
            "title": "Propose the follow-up",
            "code": FLOW_STEP_2,
            "datasets": ["deals"],
            "capability": "propose_writes",
            "receives": [{"step": 1, "name": "by_stage.csv"}],
        },
    ]
    steps[0].update(extra.pop("step_1", {}))
    steps[1].update(extra.pop("step_2", {}))
    return {
        "conversation_id": "conv-console-flow",
        "title": "Pipeline review",
        "plan": "Count the deals per stage, then propose a change based on the count.",
        "steps": steps,
        **extra,
    }


def flow_hashes(flow: dict[str, Any]) -> dict[str, Any]:
    """What the flow approval screen sends: every step's code and bundle hashes, in order."""
    return {
        "steps": [
            {"code_sha256": s["run"]["code_sha256"], "bundle_sha256": s["run"]["bundle_sha256"]}
            for s in flow["steps"]
        ]
    }


def fake_flow_step(code: str, *, out_dir: Path, carry_dir: Path | None = None, **_: Any):
    """Stands in for `backend.sandbox.run_code` on the demo flow's steps: what their real VM runs write.
    Step 2 reads what it was handed, as the real one does; "FAIL" in the code fails the step."""
    from backend.sandbox.models import OutputFile, SandboxResult, Timings, VmInfo

    vm = VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64)
    if "FAIL" in code:
        return SandboxResult(status="failed", exit_code=1, stderr="Traceback …\nKeyError: 'stage'\n", vm=vm)
    timings = Timings(start=300, execute=900, collect=50, total=1250)
    if "/work/flow/" not in code:  # step 1
        png, table = chart_png(), b"stage,deals\nnegotiation,3\nproposal,5\n"
        (out_dir / "flow_deals_per_stage.png").write_bytes(png)
        (out_dir / "by_stage.csv").write_bytes(table)
        (out_dir / "conclusion.json").write_text('{"deals": 8, "stages": 2}')
        files = [
            OutputFile(name=name, size=len(body), sha256=hashlib.sha256(body).hexdigest())
            for name, body in (("by_stage.csv", table), ("flow_deals_per_stage.png", png))
        ]
        return SandboxResult(
            status="succeeded",
            exit_code=0,
            stdout="step 1 counted 8 deals\n",
            files=files,
            timings_ms=timings,
            vm=vm,
        )
    handed = json.loads((carry_dir / "step-1" / "conclusion.json").read_text()) if carry_dir else {}
    (out_dir / "conclusion.json").write_text(
        json.dumps({"handed_deals": handed.get("deals"), "largest_stage": "proposal"})
    )
    return SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout=f"step 2 was handed {handed.get('deals')} deals in 2 stages\n",
        timings_ms=timings,
        vm=vm,
    )


async def sign_in(user: User, email: str, password: str = "demo", then: str | None = None) -> None:
    await user.open("/login" + (f"?next={then}" if then else ""))
    user.find(marker="email").type(email)
    user.find(marker="password").type(password)
    user.find(marker="sign-in").click()
    await user.should_see(marker="page-title", retries=50)


def visible_text(html_fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", html_fragment))


CONSOLE = "127.0.0.1"  # the console's own address: every sign-in through it reaches the API from here


@asynccontextmanager
async def console_api(demo_db: str) -> AsyncIterator[Any]:
    """The console's own API client (console/api.py), as the login page uses it, from the console's address."""

    app = _shared_app(demo_db)
    transport = httpx.ASGITransport(app=app, client=(CONSOLE, 40000))
    yield ApiConfig("http://testserver.local", transport=transport, origin=console_origin())


async def _console_sign_in(config: Any, email: str, password: str, browser: str) -> int:
    from console.api import Api, ApiError

    try:
        await Api(config).login(email, password, client_address=browser)
    except ApiError as exc:
        return exc.status
    return 200
