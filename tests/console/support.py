"""What the assistant would do over the API (propose runs), and a stand-in VM for page tests that must
show a finished run without booting one (the browser tests use the real sandbox)."""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path
from typing import Any

import httpx

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
        from tests.conftest import console_origin

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
    from backend import sandbox, worker

    monkeypatch.setattr(sandbox, "run_code", fake_failing_run_code if fail else fake_run_code)
    return await worker.execute(run_id)
