"""A flow's outputs keep the permissions of everything that reached them (review N-H1, issue 23).

The attack from the review: hannah holds the HR permission; she is put in team East, which maria manages,
and maria has no HR permission (the seed gives hannah no manager: she manages the People team alone). As a
manager maria sees hannah's private Drive files. hannah's two-step flow reads `employees` in step 1 and
writes pay.csv and a conclusion; step 2 stages nothing, receives pay.csv and copies it to its own output.
Step 2's files hold employees data, so they must be tagged `employees` like step 1's: maria cannot list,
download or stage them; hannah can. The same for every firing of the flow's schedule.

Positive controls: the same flow over a dataset maria may read is visible to her as hannah's manager, and
with the inheritance taken out (the code before the fix) the employees copy is visible to her: the checks
below would notice the leak.

Also here: a run or flow staging a tagged output keeps its tags (review: "tags propagate through staged
files"); a requester who lost a permission no longer reads past results computed from it (review Low 4);
a conclusion nested too deeply fails its step cleanly (review Low 7).

The VM is replaced by a stand-in that runs each step's (trusted, test-written) Python on the host with the
guest's paths pointed at the run's folders: its input bundle, its output folder and its /work/flow carry.
Everything around it - staging, the hand-over between steps, filing outputs in Drive, the visibility rule -
is the worker's own code. tests/flows/test_flows_vm.py runs the same flow in real VMs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from backend import execution, sandbox
from backend.drive import service as drive
from backend.drive.tables import DriveFolder
from backend.flows import progress
from backend.flows.tables import Flow
from backend.records.visibility import unreadable_sources
from backend.runs.tables import Run
from backend.tenancy.context import UserContext, load_user_context_by_email
from backend.tenancy.tables import PermissionSet, User, UserPermissionSet
from tests.support.flows import (
    ADMIN,
    HANNAH,
    MARIA,
    SEES_ALL,
    SEES_NOTHING,
    STEP_1,
    acme_id,
    approve_flow_as,
    drive_view,
    flow_as,
    flow_body,
    host_vm,
    outputs,
    step,
    two_steps,
)
from tests.support.http import approve_as, login, token_for
from tests.support.runs import proposal

# a run (or step 1) that stages an earlier output as a Drive file and copies it, naming no dataset
STAGED_COPY = """
import glob, shutil
shutil.copy(sorted(glob.glob("/work/input/files/*/*.csv"))[0], "/work/output/pay.csv")
print("copied")
"""


async def run_flow(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    """hannah's assistant proposes, hannah approves as a person, the worker runs every step."""
    token = await token_for(client, HANNAH)
    r = await client.post("/api/flows", json=body, headers=token)
    assert r.status_code == 201, r.text
    assert (await approve_flow_as(client, HANNAH, r.json())).status_code == 200
    client.cookies.clear()
    await execution.drain()
    return await flow_as(client, HANNAH, r.json()["id"])


# how a step's tags are inherited, withheld or checked is the app's, not an engine's (the tag's Drive rule on
# PostgreSQL: tests/drive/test_output_visibility; a whole flow through the stand-in on both: the migration test)
@pytest.mark.sqlite
async def test_a_later_step_that_stages_nothing_keeps_employees_from_the_manager_without_hr(
    client, hannah_under_maria
) -> None:
    done = await run_flow(client, two_steps())
    assert done["status"] == "succeeded", [
        (s["run"]["status"], s["run"]["error_message"]) for s in done["steps"]
    ]
    first, second = done["steps"]
    assert second["run"]["datasets"] == [] and second["carried"] is not None
    assert [c["name"] for c in second["carried"]] == ["step-1/conclusion.json", "step-1/pay.csv"]
    # step 2 read no dataset, yet what it produced is computed from employees
    assert first["source_datasets"] == second["source_datasets"] == ["employees"]
    assert second["run"]["source_datasets"] == ["employees"]
    stored = await Run.select(Run.source_datasets).where(Run.id == second["run"]["id"]).output(load_json=True)
    assert stored[0]["source_datasets"] == ["employees"]  # kept with the carry, in the database
    files = await outputs(second["run"]["id"])
    assert set(files) == {"pay.csv", "conclusion.json"}
    assert {n: f["source_datasets"] for n, f in files.items()} == {
        "pay.csv": ["employees"],
        "conclusion.json": ["employees"],
    }
    folder = await DriveFolder.select(DriveFolder.source_datasets).where(
        DriveFolder.run_id == second["run"]["id"]
    )
    assert drive.source_tags(folder[0]["source_datasets"]) == ["employees"]
    # the attack: maria, hannah's manager without HR, sees none of step 2's files, nor can stage them
    for name in ("pay.csv", "conclusion.json"):
        assert await drive_view(client, MARIA, files[name], second["run"]["id"]) == SEES_NOTHING, name
    # hannah, who ran it, and the admin see and stage them
    for email in (HANNAH, ADMIN):
        assert await drive_view(client, email, files["pay.csv"], second["run"]["id"]) == SEES_ALL, email
    assert await drive_view(client, HANNAH, files["conclusion.json"], second["run"]["id"]) == SEES_ALL
    # the hand-over is on the record with what it carried in
    client.cookies.clear()
    await login(client, HANNAH)
    trail = (await client.get(f"/api/flows/{done['id']}/audit")).json()
    handed = [e["data"] for e in trail if e["action"] == "flow.step_handed"]
    assert [h["source_datasets"] for h in handed] == [["employees"], ["employees"]], handed


@pytest.mark.sqlite  # the app's, not an engine's (see the first test's mark)
async def test_positive_controls_a_readable_source_shows_and_removing_the_inheritance_leaks(
    client, hannah_under_maria, monkeypatch
) -> None:
    """The same flow over products, which maria may read: as hannah's manager she sees step 2's copy (the
    visibility checks above can see a file at all). And with step 2 inheriting nothing, as before the fix,
    she sees the employees copy: the leak the review found, which the checks above would catch."""
    control = await run_flow(client, two_steps("products"))
    assert control["status"] == "succeeded" and control["steps"][1]["source_datasets"] == ["products"]
    files = await outputs(control["steps"][1]["run"]["id"])
    assert await drive_view(client, MARIA, files["pay.csv"], control["steps"][1]["run"]["id"]) == SEES_ALL

    async def nothing_inherited(run: dict[str, Any]) -> set[str]:
        return set()

    monkeypatch.setattr(progress, "inherited_sources", nothing_inherited)
    leaky = await run_flow(client, two_steps())
    second = leaky["steps"][1]["run"]
    files = await outputs(second["id"])
    assert files["pay.csv"]["source_datasets"] == []
    assert await drive_view(client, MARIA, files["pay.csv"], second["id"]) == SEES_ALL


@pytest.mark.sqlite  # the app's, not an engine's (see the first test's mark)
async def test_every_scheduled_firing_tags_the_later_step_too(client, hannah_under_maria) -> None:
    from backend.schedules import service as schedules

    done = await run_flow(client, two_steps())
    assert done["status"] == "succeeded"
    await login(client, HANNAH)
    r = await client.post("/api/schedules", json={"flow_id": done["id"], "cron": "0 6 * * *"})
    assert r.status_code == 201, r.text
    client.cookies.clear()
    schedule_id = r.json()["id"]
    for _ in range(2):  # each firing is a new flow; each is tagged on its own
        assert await schedules.fire(schedule_id) is not None
        await execution.drain()
    fired = await Flow.select(Flow.id).where(Flow.schedule_id == schedule_id).order_by(Flow.id)
    assert len(fired) == 2
    for row in fired:
        flow = await flow_as(client, HANNAH, row["id"])
        assert flow["status"] == "succeeded" and flow["approval"]["by"] == f"schedule:{schedule_id}"
        second = flow["steps"][1]
        assert second["run"]["datasets"] == [] and second["source_datasets"] == ["employees"]
        files = await outputs(second["run"]["id"])
        assert (
            files["pay.csv"]["source_datasets"]
            == files["conclusion.json"]["source_datasets"]
            == ["employees"]
        )
        for name in ("pay.csv", "conclusion.json"):
            assert await drive_view(client, MARIA, files[name], second["run"]["id"]) == SEES_NOTHING, name
        assert await drive_view(client, HANNAH, files["pay.csv"], second["run"]["id"]) == SEES_ALL


@pytest.mark.sqlite  # the app's, not an engine's (see the first test's mark)
async def test_staging_a_flows_output_keeps_its_tags_into_a_run_and_into_another_flow(
    client, hannah_under_maria
) -> None:
    """A follow-up that stages step 2's copy (naming no dataset) produces files still tagged employees; a
    flow whose step 1 stages it hands that on to its step 2."""
    done = await run_flow(client, two_steps())
    copy = (await outputs(done["steps"][1]["run"]["id"]))["pay.csv"]
    token = await token_for(client, HANNAH)
    r = await client.post("/api/runs", json=proposal(STAGED_COPY, [], files=[copy["id"]]), headers=token)
    assert r.status_code == 201, r.text
    follow_up = r.json()
    assert follow_up["datasets"] == [] and follow_up["file_ids"] == [copy["id"]]
    assert (await approve_as(client, HANNAH, follow_up)).status_code == 200
    client.cookies.clear()
    assert await execution.execute(follow_up["id"]) == "succeeded"
    files = await outputs(follow_up["id"])
    assert files and all(f["source_datasets"] == ["employees"] for f in files.values()), files
    assert await drive_view(client, MARIA, files["pay.csv"], follow_up["id"]) == SEES_NOTHING
    # a flow staging the copy in step 1 (no dataset at all): its step 2 inherits the tag too
    body = flow_body(
        step(STAGED_COPY, [], files=[copy["id"]], title="Again"),
        step("print('nothing staged')", [], title="After"),
    )
    again = await run_flow(client, body)
    assert again["status"] == "succeeded", again
    assert [s["source_datasets"] for s in again["steps"]] == [["employees"], ["employees"]]


# ------------------------------------------------------------------ revoked permissions and past results


async def _revoke_hr(email: str) -> None:
    user = await User.select(User.id).where(User.email == email).first()
    hr = await PermissionSet.select(PermissionSet.id).where(
        (PermissionSet.name == "HR") & (PermissionSet.company == await acme_id())
    )
    await UserPermissionSet.delete().where(
        (UserPermissionSet.user == user["id"]) & (UserPermissionSet.permission_set == hr[0]["id"])
    )
    assert not (await load_user_context_by_email(email)).can("employees")


async def _run(client: Any, code: str, datasets: list[str]) -> int:
    token = await token_for(client, HANNAH)
    r = await client.post("/api/runs", json=proposal(code, datasets), headers=token)
    assert r.status_code == 201, r.text
    assert (await approve_as(client, HANNAH, r.json())).status_code == 200
    client.cookies.clear()
    assert await execution.execute(r.json()["id"]) == "succeeded"
    return r.json()["id"]


async def _as(client: Any, email: str, path: str, token: bool = False) -> Any:
    """GET as a signed-in person, or as their assistant's token (what MCP get_run sends)."""
    client.cookies.clear()
    headers = await token_for(client, email) if token else {}
    if not token:
        await login(client, email)
    r = await client.get(path, headers=headers)
    client.cookies.clear()
    assert r.status_code == 200, r.text
    return r


@pytest.mark.sqlite  # withholding is unreadable_sources on the caller's context, in Python (see the first test's mark)
async def test_a_requester_who_lost_hr_no_longer_reads_what_her_runs_and_flows_computed_from_employees(
    client, hannah_under_maria
) -> None:
    """Review Low 4: past stdout, conclusions and carried files follow the permission as it is now. The
    positive controls: before the revocation hannah reads them all; after it the admin still does, and
    hannah still reads a run over products."""
    flow = await run_flow(client, two_steps())
    run_id = await _run(client, STEP_1.replace("DATASET", "employees"), ["employees"])
    products = await _run(client, STEP_1.replace("DATASET", "products"), ["products"])
    before = (await _as(client, HANNAH, f"/api/flows/{flow['id']}")).json()
    secret = before["steps"][0]["run"]["result"]["stdout"].split("first row:")[1].strip()
    assert secret and before["steps"][0]["conclusion"]["rows"] > 0
    assert before["steps"][1]["conclusion"] == {"copied_rows": before["steps"][0]["conclusion"]["rows"]}
    assert [c["name"] for c in before["steps"][1]["carried"]] == ["step-1/conclusion.json", "step-1/pay.csv"]
    assert before["steps"][1]["withheld"] is None and before["steps"][1]["run"]["withheld"] is None
    plain = (await _as(client, HANNAH, f"/api/runs/{run_id}", token=True)).json()
    assert secret in plain["result"]["stdout"] and plain["output_files"] and plain["withheld"] is None

    def handed(trail: Any) -> dict[str, Any]:
        return next(e for e in trail.json() if e["action"] == "flow.step_handed" and e["data"]["step"] == 2)

    trail = await _as(client, HANNAH, f"/api/flows/{flow['id']}/audit")  # what step 2 was handed, by name
    assert [c["name"] for c in handed(trail)["data"]["carried"]] == [
        "step-1/conclusion.json",
        "step-1/pay.csv",
    ]

    await _revoke_hr(HANNAH)

    # D-L1: the names (and hashes) of what a step was handed are its contents too, in the flow's trail
    trail = await _as(client, HANNAH, f"/api/flows/{flow['id']}/audit")
    assert "carried" not in handed(trail)["data"] and "carried" in handed(trail)["data_withheld"]
    admin_trail = await _as(client, ADMIN, f"/api/flows/{flow['id']}/audit")  # control: the admin's has them
    assert "step-1/pay.csv" in [c["name"] for c in handed(admin_trail)["data"]["carried"]]

    after = await _as(client, HANNAH, f"/api/flows/{flow['id']}")
    assert secret not in after.text
    for s in after.json()["steps"]:
        assert s["conclusion"] is None and s["carried"] is None, s
        assert s["withheld"] and "employees" in s["withheld"] and s["source_datasets"] == ["employees"]
        run = s["run"]
        assert run["withheld"] == s["withheld"]
        assert run["result"]["stdout"] == f"[{run['withheld']}]" and run["result"]["files"] == []
        assert run["output_files"] == []
    for token in (False, True):  # the console's session, and the assistant's token (MCP get_run)
        shown = await _as(client, HANNAH, f"/api/runs/{run_id}", token=token)
        assert secret not in shown.text
        body = shown.json()
        assert body["withheld"].startswith("withheld: this run's results are computed from employees")
        assert body["result"]["stdout"] == f"[{body['withheld']}]" and body["output_files"] == []
    # positive controls: the admin still reads everything; hannah still reads her run over products
    admin = await _as(client, ADMIN, f"/api/flows/{flow['id']}")
    assert secret in admin.text and admin.json()["steps"][1]["conclusion"] == before["steps"][1]["conclusion"]
    assert all(s["withheld"] is None for s in admin.json()["steps"])
    kept = (await _as(client, HANNAH, f"/api/runs/{products}")).json()
    assert kept["withheld"] is None and "first row:" in kept["result"]["stdout"] and kept["output_files"]


@pytest.mark.sqlite  # unreadable_sources on a loaded context, not an engine's
async def test_the_rule_for_results_is_the_rule_for_drive(demo_db: str) -> None:
    """One condition hides a tagged Drive row and withholds a run's results: a dataset in the tags that
    the caller may not read. Admins are never refused; a tag naming no dataset hides nothing."""
    maria, admin = await load_user_context_by_email(MARIA), await load_user_context_by_email(ADMIN)
    assert unreadable_sources(maria, ["employees", "deals"]) == ["employees"]
    assert unreadable_sources(maria, ["deals", "products", "employees2"]) == []
    assert unreadable_sources(admin, ["employees"]) == []
    hannah: UserContext = await load_user_context_by_email(HANNAH)
    assert unreadable_sources(hannah, ["employees"]) == [] and unreadable_sources(hannah, ["deals"]) == [
        "deals"
    ]


# ------------------------------------------------------------------------- conclusions nested too deeply


def _nested(depth: int) -> str:
    return f"open('/work/output/conclusion.json', 'w').write('[' * {depth} + ']' * {depth})\n"


# the depth check comes before anything is stored (the encoder's refusal runs on both engines below)
@pytest.mark.sqlite
@pytest.mark.parametrize(
    "depth",
    [8000, 300],
    ids=["past_the_parser", "past_the_encoder"],
)
async def test_a_conclusion_nested_too_deeply_fails_its_step_cleanly(
    client, hannah_under_maria, depth
) -> None:
    """Review Low 7: 8000 levels (16,000 bytes, under the 16 KiB cap) overflowed the parser's recursion
    (RecursionError, an internal error); 300 parse, but could not be stored (the control below). Both fail
    the step with a clear message, the rest is skipped and the flow detail still answers."""
    assert len(_nested(depth)) < 16384
    flow = await run_flow(client, flow_body(step(_nested(depth), ["products"]), step("print('after')", [])))
    first, second = (s["run"] for s in flow["steps"])
    assert first["status"] == "failed", first
    assert "conclusion.json nests lists and objects more than 64 levels deep" in first["error_message"]
    assert second["status"] == "skipped" and flow["status"] == "failed"
    assert flow["steps"][0]["conclusion"] is None


async def test_positive_controls_a_conclusion_64_deep_is_kept_and_one_300_deep_cannot_be_stored(
    client, hannah_under_maria
) -> None:
    """64 levels are kept and shown. 300 levels, unchecked, would reach the statement that stores the
    conclusion (progress.collect), and the database layer's JSON encoder refuses it: an internal error in
    the worker, a 500 on a fleet's result upload. The depth check stops it before."""
    flow = await run_flow(client, flow_body(step(_nested(64), ["products"]), step("print('after')", [])))
    assert flow["status"] == "succeeded", [
        (s["run"]["status"], s["run"]["error_message"]) for s in flow["steps"]
    ]
    assert progress.json_depth(flow["steps"][0]["conclusion"]) == 64
    deep = json.loads("[" * 300 + "]" * 300)
    assert progress.json_depth(deep) == 300 and progress.json_depth({"a": [1, {"b": 2}]}) == 3
    with pytest.raises(TypeError, match="Recursion limit"):
        await Run.update({Run.conclusion: deep}).where(Run.id == flow["steps"][0]["run"]["id"])


# ---------------------------------------------------------------- flow outputs filed before the fix


async def test_the_migration_retags_what_earlier_flows_filed_without_their_inputs(
    client, hannah_under_maria, monkeypatch
) -> None:
    """A flow run by the code before the fix (step 2 inherits nothing) left step 2's copy untagged, in
    maria's sight, and no stored sources. The migration that follows `run.source_datasets` re-tags it
    from the steps' own records: gone from maria's Drive, still in hannah's. A flow over products, which
    maria may read, is re-tagged `products` and stays visible to her (the control)."""
    import importlib
    import os

    retag = importlib.import_module("backend.migrations.cleanroom_2026_12_02t02_11_00_000000")

    async def nothing_inherited(run: dict[str, Any]) -> set[str]:
        return set()

    monkeypatch.setattr(progress, "inherited_sources", nothing_inherited)
    old = await run_flow(client, two_steps())
    control = await run_flow(client, two_steps("products"))
    monkeypatch.undo()
    monkeypatch.setattr(sandbox, "run_code", host_vm)
    steps = [s["run"]["id"] for f in (old, control) for s in f["steps"]]
    await Run.update({Run.source_datasets: None}).where(Run.id.is_in(steps))  # as before the column
    leaked = (await outputs(old["steps"][1]["run"]["id"]))["pay.csv"]
    assert leaked["source_datasets"] == []
    assert await drive_view(client, MARIA, leaked, old["steps"][1]["run"]["id"]) == SEES_ALL

    os.environ.setdefault("PICCOLO_CONF", "backend.piccolo_conf")
    await (await retag.forwards()).run()

    rows = await Run.select(Run.id, Run.source_datasets).where(Run.id.is_in(steps)).output(load_json=True)
    assert {r["id"]: r["source_datasets"] for r in rows} == dict(
        zip(steps, [["employees"], ["employees"], ["products"], ["products"]], strict=True)
    )
    for flow, tag in ((old, "employees"), (control, "products")):
        second = flow["steps"][1]["run"]["id"]
        files = await outputs(second)
        assert {f["source_datasets"][0] for f in files.values()} == {tag}
        folder = await DriveFolder.select(DriveFolder.source_datasets).where(DriveFolder.run_id == second)
        assert drive.source_tags(folder[0]["source_datasets"]) == [tag]
    assert await drive_view(client, MARIA, leaked, old["steps"][1]["run"]["id"]) == SEES_NOTHING
    assert await drive_view(client, HANNAH, leaked, old["steps"][1]["run"]["id"]) == SEES_ALL
    copy = (await outputs(control["steps"][1]["run"]["id"]))["pay.csv"]
    assert await drive_view(client, MARIA, copy, control["steps"][1]["run"]["id"]) == SEES_ALL
