"""What an operator sees (backend/observe.py, backend/metrics.py): a request id in every JSON log line of a
request and of the worker's run it proposed; per-route request counts and errors; the process and garbage-
collector collectors; counters for findings, refusals, charges and failed sign-ins, each beside a control that
it does not move otherwise; gauges for the last `audit verify`, the oldest waiting run and the pools.

SQLite only: nothing here is PostgreSQL's. Counters are this process's (prometheus_client's default registry,
as one API process serves them), so every check is a difference between two scrapes.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from backend import observe
from backend.audit import anchor
from backend.audit import service as audit
from backend.audit.tables import AuditEntry
from backend.credits import service as credits
from backend.runs.tables import Run
from backend.tenancy.tables import Company
from tests.fleet.test_metrics import metrics_token  # noqa: F401 - an autouse fixture: metrics served
from tests.support.console import execute_with_stand_in_vm
from tests.support.fleet import SNEAKY
from tests.support.http import approve_as, login, token_for
from tests.support.metrics import samples_of, scrape_text, value
from tests.support.runs import enable_code, proposal

pytestmark = pytest.mark.sqlite


def parsed(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Every log line the process writes meanwhile, as the service writes them (JSON)."""
    out = io.StringIO()
    handler = observe.handler("json", out)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def everything(client) -> dict:
    return samples_of(await scrape_text(client), families=None)


def moved(before: dict, after: dict, name: str, **labels: str) -> float:
    return (value(after, name, **labels) or 0.0) - (value(before, name, **labels) or 0.0)


async def test_a_request_id_goes_from_the_request_to_its_log_lines_and_to_the_worker_running_its_run(
    client, monkeypatch, captured
) -> None:
    await enable_code()
    alice = await token_for(client, "alice@acme.example")

    # the console's id is taken, answered and stored with the run it proposed
    made = await client.post("/api/runs", json=proposal(), headers={**alice, "X-Request-Id": "console-req-1"})
    assert made.status_code == 201, made.text
    assert made.headers["x-request-id"] == "console-req-1"
    run_id = made.json()["id"]
    assert (await Run.select(Run.request_id).where(Run.id == run_id).first())["request_id"] == "console-req-1"
    # control: without one, a fresh id is made and answered
    fresh = (await client.get(f"/api/runs/{run_id}", headers=alice)).headers["x-request-id"]
    assert observe.REQUEST_ID.fullmatch(fresh) and fresh != "console-req-1"

    # the worker runs it under that id (a stand-in VM: this is about the log lines, not the VM)
    assert (await approve_as(client, "alice@acme.example", run_id)).status_code == 200
    assert await execute_with_stand_in_vm(run_id, monkeypatch) == "succeeded"
    worker = [line for line in parsed(captured) if line["logger"] == "cleanroom.loop"]
    assert [line["message"] for line in worker if line.get("run_id") == run_id] == [
        f"run {run_id}: started",
        f"run {run_id}: succeeded",
    ]
    assert {line.get("request_id") for line in worker if line.get("run_id") == run_id} == {"console-req-1"}

    # an API log line carries its request's id: an unexpected error, logged with its traceback
    async def boom(user):
        raise RuntimeError("the health check broke")

    monkeypatch.setattr("backend.system_controller.company_health", boom)
    failed = await client.get("/api/system/health", headers={**alice, "X-Request-Id": "req-boom-2"})
    assert failed.status_code == 500 and failed.headers["x-request-id"] == "req-boom-2"
    api = [line for line in parsed(captured) if line["logger"] == "cleanroom.api"]
    assert api[-1]["request_id"] == "req-boom-2" and "the health check broke" in api[-1]["exc"]
    assert api[-1]["message"] == "unexpected error on GET /api/system/health"


async def test_a_hostile_request_id_is_replaced_never_logged(client, monkeypatch, captured) -> None:
    alice = await token_for(client, "alice@acme.example")

    async def boom(user):
        raise RuntimeError("logged")

    monkeypatch.setattr("backend.system_controller.company_health", boom)
    for hostile in ('evil\n{"level": "CRITICAL", "message": "forged"}', "x" * 65, "spaces are out", ""):
        response = await client.get("/api/system/health", headers={**alice, "X-Request-Id": hostile})
        answered = response.headers["x-request-id"]
        assert answered != hostile and observe.REQUEST_ID.fullmatch(answered) and len(answered) == 16
    lines = parsed(captured)  # every line parses as one object: no forged line
    assert "forged" not in captured.getvalue() and "x" * 65 not in captured.getvalue()
    errors = [line for line in lines if line["logger"] == "cleanroom.api"]
    assert len(errors) == 4 and all(observe.REQUEST_ID.fullmatch(line["request_id"]) for line in errors)
    # control: a plain id of the longest length is kept
    kept = "k" * 64
    assert (await client.get("/api/health", headers={"X-Request-Id": kept})).headers["x-request-id"] == kept


async def test_requests_are_counted_per_route_and_errors_apart(client, monkeypatch) -> None:
    alice = await token_for(client, "alice@acme.example")
    route = {"app_name": "cleanroom", "method": "GET", "path": "/api/runs/{run_id}"}
    before = await everything(client)
    for run_id in (999_001, 999_002, 999_003):  # three ids, one route template: one series, not three
        assert (await client.get(f"/api/runs/{run_id}", headers=alice)).status_code == 404
    assert (await client.get("/api/system/health", headers=alice)).status_code == 200

    async def boom(user):
        raise RuntimeError("broken")

    monkeypatch.setattr("backend.system_controller.company_health", boom)
    assert (await client.get("/api/system/health", headers=alice)).status_code == 500
    after = await everything(client)

    total, errors = "cleanroom_http_requests_total", "cleanroom_http_requests_error_total"
    health = {"app_name": "cleanroom", "method": "GET", "path": "/api/system/health"}
    assert moved(before, after, total, **route, status_code="404") == 3
    assert not [k for k in after if k[0] == total and "999001" in str(k)]  # no path with an id in it
    assert moved(before, after, total, **health, status_code="200") == 1
    assert moved(before, after, total, **health, status_code="500") == 1
    assert moved(before, after, errors, **health, status_code="500") == 1  # the 5xx, counted as an error
    assert moved(before, after, errors, **route, status_code="404") == 0  # control: a 404 is no server error
    assert (
        moved(before, after, "cleanroom_http_request_duration_seconds_count", **health, status_code="200")
        == 1
    )
    # the process and its garbage collector, as prometheus_client's default collectors report them
    assert value(after, "process_cpu_seconds_total") > 0
    assert value(after, "python_gc_collections_total", generation="0") is not None


async def test_findings_refusals_charges_and_failed_sign_ins_are_counted(client, monkeypatch) -> None:
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    before = await everything(client)
    findings, refusals = "cleanroom_findings_total", "cleanroom_refusals_total"
    charged, failed = "cleanroom_credits_charged_total", "cleanroom_failed_sign_ins_total"

    plain = (await client.post("/api/runs", json=proposal(), headers=alice)).json()
    control = await everything(client)
    assert moved(before, control, findings, category="invisible_characters") == 0  # a clean proposal
    sneaky = await client.post("/api/runs", json=proposal(code=SNEAKY), headers=alice)
    assert sneaky.status_code == 201
    after = await everything(client)
    assert moved(control, after, findings, category="invisible_characters") == 1

    # refusals, by the API's error code: a token on a person-only route (approving), a run that is not there
    assert sum(v for (name, _), v in after.items() if name == refusals) == sum(
        v for (name, _), v in before.items() if name == refusals
    )  # control: every request so far succeeded
    token_refused = await client.post(f"/api/runs/{plain['id']}/approve", json={}, headers=alice)
    assert token_refused.status_code == 403, token_refused.text
    assert (await client.get("/api/runs/999999", headers=alice)).json()["error"] == "not_found"
    after_refusals = await everything(client)
    assert moved(after, after_refusals, refusals, kind=token_refused.json()["error"]) == 1
    assert moved(after, after_refusals, refusals, kind="not_found") == 1
    assert (
        sum(v for (name, _), v in after_refusals.items() if name == refusals)
        - sum(v for (name, _), v in after.items() if name == refusals)
        == 2
    )

    # a charge: the run's credits, once it ran (control: approving it charged nothing yet)
    assert (await approve_as(client, "alice@acme.example", plain["id"])).status_code == 200
    approved = await everything(client)
    assert moved(after_refusals, approved, charged, kind="run") == 0
    await execute_with_stand_in_vm(plain["id"], monkeypatch)
    ran = await everything(client)
    cost = (await Run.select(Run.credits_charged).where(Run.id == plain["id"]).first())["credits_charged"]
    assert cost > 0 and moved(approved, ran, charged, kind="run") == pytest.approx(cost, abs=0.01)

    # failed sign-ins: a wrong password counts, the right one does not
    client.cookies.clear()
    wrong = await client.post("/api/auth/login", json={"email": "alice@acme.example", "password": "not it"})
    assert wrong.status_code == 401
    await login(client, "alice@acme.example")
    signed = await everything(client)
    assert moved(ran, signed, failed, reason="credentials") == 1
    assert moved(ran, signed, failed, reason="throttled") == 0


async def test_the_last_audit_verify_oldest_waits_and_pools_are_gauges(client) -> None:
    await enable_code()
    alice = await token_for(client, "alice@acme.example")
    acme = (await Company.select(Company.id).where(Company.name == "Acme Analytics").first())["id"]
    globex = (await Company.select(Company.id).where(Company.name == "Globex").first())["id"]
    anchor.verified_path().unlink(missing_ok=True)
    before = await everything(client)
    assert (
        value(before, "cleanroom_audit_verify_ok") is None
    )  # never run: no series (the alert sees it absent)

    assert (await audit.verify()).ok
    assert value(await everything(client), "cleanroom_audit_verify_ok") == 1
    # hostile: an entry rewritten in the table; the next verify fails and the gauge says so
    newest = (await AuditEntry.select(AuditEntry.seq).order_by(AuditEntry.seq, ascending=False).first())[
        "seq"
    ]
    await AuditEntry.update({AuditEntry.hash: "0" * 64}).where(AuditEntry.seq == newest)
    assert not (await audit.verify()).ok
    broken = await everything(client)
    assert value(broken, "cleanroom_audit_verify_ok") == 0
    assert value(broken, "cleanroom_audit_verify_timestamp_seconds") > 0

    assert (await client.post("/api/runs", json=proposal(), headers=alice)).status_code == 201
    samples = await everything(client)
    assert value(samples, "cleanroom_approval_oldest_age_seconds", company=str(acme)) >= 0
    assert value(samples, "cleanroom_approval_oldest_age_seconds", company=str(globex)) is None  # none waits
    pool, held, _ = await credits.balance(acme)
    assert value(samples, "cleanroom_credits_pool", company=str(acme)) == pool
    used = await credits.pools_and_used()
    assert value(samples, "cleanroom_credits_used", company=str(globex)) == used[globex][1]
