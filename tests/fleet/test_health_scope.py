"""`GET /api/system/health` in a fleet shows a company its own runs and nothing of another's: not the worker
hosts (they run every company's runs, and their names, load and heartbeats say how busy the others are),
not the queue of every company. The operator sees both (`cleanroom health`, `cleanroom workers list`).

The hostile party is Globex's admin, curious about Acme (the other company in the demo seed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from backend.fleet.tables import WorkerHost
from backend.system_controller import operator_health
from tests.support.http import login
from tests.support.tenancy import _acme_runs, _fake_sandbox_health

HOST = "hv_acme_rack7"


async def test_a_company_sees_no_worker_host_and_no_queue_but_its_own(client, monkeypatch) -> None:
    _fake_sandbox_health(monkeypatch)
    await _acme_runs(client, ["queued", "queued", "queued", "running"])
    now = datetime.now(UTC)
    await WorkerHost(host_id=HOST, capacity=8, running=3, started_at=now, last_heartbeat=now).save()

    await login(client, "admin@globex.example")
    globex = (await client.get("/api/system/health")).json()
    assert globex["workers"] is None and globex["queue_depth_all"] is None
    assert globex["queue_length"] == 0 and globex["running_runs"] == 0
    assert HOST not in json.dumps(globex)
    client.cookies.clear()

    # positive controls: Acme sees its own counts; the operator sees the host and every company's queue
    await login(client, "admin@acme.example")
    acme = (await client.get("/api/system/health")).json()
    assert acme["queue_length"] == 3 and acme["running_runs"] == 1
    assert acme["workers"] is None and HOST not in json.dumps(acme)  # not Acme's either: shared hosts
    info = await operator_health()
    assert [w["host_id"] for w in info["workers"]] == [HOST]
    assert sum(info["queue_by_company"].values()) == info["queue_length"] >= 3
