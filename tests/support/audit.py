"""An auditor's account and the app's routes it may reach, the audit export's verifier, and a finished run with
secrets in its output (tests/audit, tests/tenancy)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from backend.actions.tables import ActionItem
from backend.audit import service as audit
from backend.audit import signing
from backend.runs.tables import Run
from backend.tenancy.tables import Company, User
from tests.support.http import approve_as, login, token_for
from tests.support.runs import enable_code, proposal

ADMIN = "admin@acme.example"


AUDITOR = "frank@acme.example"  # Finance: deals and invoices, no HR permission


def app_routes(app: Any = None) -> list[tuple[str, str, dict[str, Any]]]:
    """Every (method, path, handler opt) of the app, from its route table (the test client's app, when given:
    making another would point the database elsewhere)."""
    if app is None:
        from backend.app import create_app

        app = create_app(run_hooks=False, pool=False)
    out = []
    for route in app.routes:
        for method, handler in getattr(route, "route_handler_map", {}).items():
            if method in ("OPTIONS", "HEAD") or route.path.startswith("/schema"):
                continue
            opt = handler[0].opt if isinstance(handler, tuple) else {}
            out.append((method, route.path, dict(opt)))
    return out


def concrete(path: str) -> str:
    """A path template with placeholders filled in: the guard answers before any id is looked up."""
    return re.sub(r"\{(\w+):(\w+)\}", lambda m: "1" if m.group(2) == "int" else "deals", path)


async def _user_id(email: str) -> int:
    return (await User.select(User.id).where(User.email == email).first())["id"]


async def make_auditor(client, email: str = AUDITOR, role: str = "auditor") -> dict[str, Any]:
    """The company admin, signed in, gives `email` the role; the client is left signed out."""
    client.cookies.clear()
    await login(client, ADMIN)
    r = await client.patch(f"/api/company/people/{await _user_id(email)}", json={"role": role})
    assert r.status_code == 200, r.text
    client.cookies.clear()
    return r.json()


VERIFIER = Path(__file__).resolve().parents[2] / "scripts" / "verify_audit_export.py"


def _verifier_module() -> Any:
    spec = importlib.util.spec_from_file_location("verify_audit_export", VERIFIER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verify(
    tmp_path: Path, lines: list[str], *args: str, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The verifier as a user runs it: its own copy, its own directory, no site-packages (-I -S), with the
    server's public key (or `key`) given on its command line."""
    alone = tmp_path / "alone"
    alone.mkdir(exist_ok=True)
    shutil.copy(VERIFIER, alone / VERIFIER.name)
    target = alone / "export.jsonl"
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", "")}
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            VERIFIER.name,
            target.name,
            "--public-key",
            key if key is not None else signing.public_text(),
            *args,
        ],
        cwd=alone,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


SECRET_STDOUT = "SECRET-STDOUT-Dagobert-salary-91234"


SECRET_VALUE = "SECRET-VALUE-new-amount-777"


SECRET_EXCERPT = "SECRET-EXCERPT-ignore-previous-instructions"


async def _run(client) -> dict:
    """Alice's assistant proposes, revises once (after the first attempt failed), Alice approves in her session; then the run is given what a
    finished run holds (set directly: this is about what the pack shows, not about running it)."""
    await enable_code()
    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    token = await token_for(client, "alice@acme.example")
    run = await client.post("/api/runs", json=proposal(code="print('v1')"), headers=token)
    assert run.status_code == 201, run.text
    await Run.update({Run.status: "failed"}).where(
        Run.id == run.json()["id"]
    )  # only a failed attempt is revised
    revised = await client.post(
        f"/api/runs/{run.json()['id']}/revisions", json={"code": "print('v2')"}, headers=token
    )
    assert revised.status_code == 201, revised.text
    run = revised.json()
    approved = await approve_as(client, "alice@acme.example", run)
    assert approved.status_code == 200, approved.text
    finding = {
        "path": "deals.csv",
        "row": 3,
        "column": "notes",
        "severity": "high",
        "category": "override",
        "excerpt": SECRET_EXCERPT,
        "reason": "instruction-like text",
        "span": [0, 10],
    }
    result = {
        "status": "succeeded",
        "exit_code": 0,
        "stdout": SECRET_STDOUT,
        "stderr": "",
        "stdout_truncated": False,
        "files": [{"name": "chart.png", "size": 123, "sha256": "ab" * 32}],
        "rejected_files": [],
        "actions": None,
        "timings_ms": {"start": 1, "execute": 2, "collect": 3, "total": 6},
        "vm": {"virt_type": "kvm", "nics": 0},
    }
    await Run.update(
        {Run.status: "succeeded", Run.result: result, Run.findings: [finding], Run.host_id: "host-a"}
    ).where(Run.id == run["id"])
    item = ActionItem(
        company=acme,
        run=run["id"],
        index=0,
        op="update",
        dataset="deals",
        record_id=5,
        changes={"amount": SECRET_VALUE},
        status="accepted",
        decided_by="alice@acme.example",
    )
    await item.save()
    await audit.record(
        "action.accepted",
        actor="alice@acme.example",
        company_id=acme,
        subject_type="action_item",
        subject_id=item.id,
        data={"run_id": run["id"], "dataset": "deals", "changes": {"amount": SECRET_VALUE}},
    )
    client.cookies.clear()
    return {**run, "item_id": item.id}
