"""Flow bodies and their steps, the hashes a person approves, approving as a person, and the people and stand-in VM
of the flow-tag tests."""

from __future__ import annotations

import contextlib
import hashlib
import io
from pathlib import Path
from typing import Any

from backend.drive import service as drive
from backend.drive.tables import DriveFile
from backend.sandbox.models import OutputFile, SandboxResult, Timings, VmInfo
from backend.tenancy.tables import User
from tests.support.http import login, token_for
from tests.support.runs import proposal


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


HANNAH, MARIA, ADMIN = "hannah@acme.example", "maria@acme.example", "admin@acme.example"


# step 1: reads a dataset, writes a table of it and a conclusion, prints a value from it
STEP_1 = """
import csv, json
rows = list(csv.DictReader(open("/work/input/datasets/DATASET.csv")))
with open("/work/output/pay.csv", "w") as out:
    out.write("id,value\\n")
    out.writelines(f"{r['id']},{r.get('salary') or r.get('name')}\\n" for r in rows)
print("first row:", rows[0].get("salary") or rows[0].get("name"))
json.dump({"rows": len(rows), "first_id": rows[0]["id"]}, open("/work/output/conclusion.json", "w"))
"""


# step 2 (the review's): stages nothing, copies what it receives, passes the conclusion on
STEP_2 = """
import json, shutil
shutil.copy("/work/flow/step-1/pay.csv", "/work/output/pay.csv")
earlier = json.load(open("/work/flow/step-1/conclusion.json"))
json.dump({"copied_rows": earlier["rows"]}, open("/work/output/conclusion.json", "w"))
print("copied", earlier["rows"], "rows")
"""


def two_steps(dataset: str = "employees", **extra: Any) -> dict[str, Any]:
    return flow_body(
        step(STEP_1.replace("DATASET", dataset), [dataset], title="Pay table"),
        step(STEP_2, [], title="Copy", receives=[{"step": 1, "name": "pay.csv"}]),
        **extra,
    )


def host_vm(
    code: str, *, input_dir: Path, out_dir: Path, carry_dir: Path | None = None, **_: Any
) -> SandboxResult:
    """What a VM returns for trusted test code, run on the host with /work/* pointed at the run's folders."""
    for guest, host in (
        ("/work/input", input_dir),
        ("/work/output", out_dir),
        ("/work/flow", carry_dir or out_dir / "no-carry"),
    ):
        code = code.replace(guest, str(host))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "<step>", "exec"), {})  # noqa: S102 - the tests' own code
    files = []
    for path in sorted(out_dir.iterdir()):
        data = path.read_bytes()
        files.append(OutputFile(name=path.name, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return SandboxResult(
        status="succeeded",
        exit_code=0,
        stdout=printed.getvalue(),
        files=files,
        timings_ms=Timings(total=900),
        vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"]),
    )


async def flow_as(client: Any, email: str, flow_id: int) -> dict[str, Any]:
    client.cookies.clear()
    await login(client, email)
    r = await client.get(f"/api/flows/{flow_id}")
    client.cookies.clear()
    assert r.status_code == 200, r.text
    return r.json()


async def outputs(run_id: int) -> dict[str, dict[str, Any]]:
    """A step's files in Drive by name, with their folder and tags."""
    rows = await DriveFile.select(
        DriveFile.id, DriveFile.name, DriveFile.folder, DriveFile.source_datasets
    ).where(DriveFile.run_id == run_id)
    return {r["name"]: {**r, "source_datasets": drive.source_tags(r["source_datasets"])} for r in rows}


async def drive_view(client: Any, email: str, file: dict[str, Any], run_id: int) -> dict[str, Any]:
    """What one signed-in person's Drive shows of a file: the full list, by run, its folder, metadata,
    content, and whether their assistant can stage it into a run of theirs."""
    client.cookies.clear()
    await login(client, email)
    listed = {f["id"] for f in (await client.get("/api/drive/files", params={"all": "true"})).json()}
    by_run = {f["id"] for f in (await client.get("/api/drive/files", params={"run_id": run_id})).json()}
    folders = {f["id"] for f in (await client.get("/api/drive/folders")).json()}
    meta = await client.get(f"/api/drive/files/{file['id']}")
    content = await client.get(f"/api/drive/files/{file['id']}/content")
    token = await token_for(client, email)
    staged = await client.post("/api/runs", json=proposal(datasets=[], files=[file["id"]]), headers=token)
    client.cookies.clear()
    return {
        "listed": file["id"] in listed,
        "by_run": file["id"] in by_run,
        "folder": file["folder"] in folders,
        "meta": meta.status_code,
        "content": content.status_code,
        "staged": staged.status_code,
    }


SEES_ALL = {"listed": True, "by_run": True, "folder": True, "meta": 200, "content": 200, "staged": 201}


SEES_NOTHING = {"listed": False, "by_run": False, "folder": False, "meta": 404, "content": 404, "staged": 404}
