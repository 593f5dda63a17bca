"""An upgrade keeps the data: a database made by the first release (0.1.0, commit 27aea02, CHANGELOG.md) and
filled through that release's own API is brought to this version by `migrate`, and then no row is lost, the
audit chain (with the anchor the old release wrote) verifies, the old release's run and token still read, and a
new run goes from proposal to its result.

The old release is the commit's tree (`git archive`, so it works in a fresh clone where tags do not travel),
run in a process of its own on this environment's packages. A run's VM is stood in for on both sides (the
VM path is tests/sandbox's); what is under test is the data the run leaves in the database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from backend import db
from backend.audit import service as audit
from backend.settings import REPO_ROOT, get_settings

pytestmark = [pytest.mark.sqlite, pytest.mark.slow]

FIRST_RELEASE = "27aea025fb65c19f774209e05f587407473045b9"  # 0.1.0 (CHANGELOG.md)
STDOUT = "42 open deals\n"

STAND_IN_VM = f'''
def stand_in_vm(code, **_):
    """The VM's result, stood in for: printed output and no proposed change."""
    from backend.sandbox.models import SandboxResult, Timings, VmInfo
    return SandboxResult(status="succeeded", exit_code=0, stdout={STDOUT!r},
                         timings_ms=Timings(start=1, execute=1, collect=1, total=3),
                         vm=VmInfo(virt_type="kvm", nics=0, guest_interfaces=["lo"], image_hash="f" * 64))
'''

# Runs in the first release's tree: the demo companies, then alice's assistant proposes through the API, alice
# approves in her session, the run executes; what it made is printed for the test.
OLD_RELEASE_FILLS = (
    STAND_IN_VM
    + """
import asyncio, json
from litestar.testing import TestClient
from backend import execution, sandbox
from backend.app import create_app
from backend.demo.seed import seed
from backend.settings import get_settings
from backend.tenancy.origin import origin_of
from backend.tenancy.tables import Company

async def prepare():
    await seed()
    await Company.update({Company.code_execution_enabled: True}).where(Company.name == "Acme Analytics")

asyncio.run(prepare())
body = {"conversation_id": "c-1", "title": "Open deals", "plan": "Count the open deals.",
        "code": "print(42)", "datasets": ["deals"], "files": []}
with TestClient(app=create_app(run_hooks=False)) as client:
    client.headers["origin"] = origin_of(get_settings().effective_console_url)
    assert client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "demo"}).status_code == 200
    token = client.post("/api/me/tokens", json={"name": "assistant"}).json()["token"]
    client.cookies.clear()
    run = client.post("/api/runs", json=body, headers={"Authorization": f"Bearer {token}"}).json()
    assert client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "demo"}).status_code == 200
    hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
    assert client.post(f"/api/runs/{run['id']}/approve", json=hashes).status_code == 200
sandbox.run_code = stand_in_vm
assert asyncio.run(execution.execute(run["id"])) == "succeeded"
print(json.dumps({"run": run["id"], "token": token}))
"""
)


def _first_release_tree(into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", FIRST_RELEASE],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"the first release's commit {FIRST_RELEASE[:12]} is not in this clone ({archive.stderr.decode()[:200]}): "
        "the upgrade test needs the history (a full clone, not --depth 1)"
    )
    tar_path = into / "release.tar"
    tar_path.write_bytes(archive.stdout)
    tree = into / "cleanroom-0.1.0"
    with tarfile.open(tar_path) as tar:
        tar.extractall(tree, filter="data")
    return tree


def _counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


@pytest.fixture
def old_database(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A database made and filled by the first release (its anchor in this process's data directory)."""
    tree = _first_release_tree(tmp_path)
    url = f"sqlite:///{tmp_path / 'cleanroom.sqlite3'}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        "PYTHONPATH": str(tree),
        "DATABASE_URL": url,
        "CLEANROOM_DATA_DIR": str(get_settings().data_dir),
    }
    done = subprocess.run(
        [sys.executable, "-c", OLD_RELEASE_FILLS],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    made = json.loads(done.stdout.strip().splitlines()[-1])
    probe = subprocess.run(
        [sys.executable, "-c", "import backend; print(backend.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.startswith(str(tree)), probe.stdout  # the old tree's code ran, not this one's
    return url, made


async def test_upgrading_the_first_releases_database_keeps_every_row_the_chain_and_runs(
    old_database: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from litestar.testing import AsyncTestClient

    from backend import execution, sandbox
    from backend.app import create_app
    from tests.support.http import console_origin

    url, made = old_database
    path = Path(url.removeprefix("sqlite:///"))
    before = _counts(path)
    assert before["audit_entry"] > 0 and before["run"] == 2  # the demo's waiting run, and the one run here

    db.configure(url)
    await db.migrate()  # what `cleanroom migrate` runs (tests/database/test_migrate.py: its lock and CLI)
    assert await db.pending_migrations() == []
    after = _counts(path)
    lost = {t: (n, after.get(t)) for t, n in before.items() if after.get(t, 0) < n}
    assert lost == {}, f"rows lost by the upgrade: {lost}"

    verified = await audit.verify()  # every entry the old release wrote, against the anchor it wrote
    assert verified.ok and verified.checked == before["audit_entry"], verified.reason
    assert await audit.start_problem() is None  # `serve` starts on it

    namespace: dict[str, Any] = {}
    exec(STAND_IN_VM, namespace)
    monkeypatch.setattr(sandbox, "run_code", namespace["stand_in_vm"])
    assistant = {"Authorization": f"Bearer {made['token']}"}  # the old release's token, kept hashed
    async with AsyncTestClient(app=create_app(database_url=url, run_hooks=False)) as client:
        client.headers["origin"] = console_origin()
        old_run = (await client.get(f"/api/runs/{made['run']}", headers=assistant)).json()
        assert old_run["status"] == "succeeded" and old_run["result"]["stdout"] == STDOUT
        body = {**old_run, "conversation_id": "c-2", "title": "Open deals again"}
        body = {k: body[k] for k in ("conversation_id", "title", "plan", "code", "datasets")}
        proposed = await client.post("/api/runs", json=body, headers=assistant)
        assert proposed.status_code == 201, proposed.text
        run = proposed.json()
        signed_in = await client.post(
            "/api/auth/login", json={"email": "alice@acme.example", "password": "demo"}
        )
        assert signed_in.status_code == 200
        hashes = {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]}
        assert (await client.post(f"/api/runs/{run['id']}/approve", json=hashes)).status_code == 200
        assert await execution.execute(run["id"]) == "succeeded"
        new_run = (await client.get(f"/api/runs/{run['id']}")).json()
        assert new_run["result"]["stdout"] == STDOUT
    final = await audit.verify()
    assert final.ok and final.checked > verified.checked, final.reason
