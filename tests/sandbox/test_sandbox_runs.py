"""What a run does, seen from the outside: limits, outputs, freshness, both start paths."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backend.sandbox import RunLimits, health, recover_leftovers, run_code
from backend.sandbox.models import MAX_OUTPUT_BYTES
from backend.settings import get_settings

pytestmark = pytest.mark.vm  # real VMs: the serial group (tests/conftest.py SERIAL_PATHS)


def test_print_succeeds_on_the_restored_fast_path(run) -> None:
    result = run("print(1)")
    assert result.status == "succeeded", result
    assert result.exit_code == 0
    assert result.stdout == "1\n"
    assert result.vm.restored is True
    assert result.vm.virt_type in ("kvm", "qemu")
    assert result.vm.nics == 0
    assert result.vm.domain_name.startswith("cleanroom-run-slot")


def test_non_zero_exit_is_failed_with_stderr(run) -> None:
    result = run("import sys\nprint('partial')\nprint('bad', file=sys.stderr)\nraise SystemExit(3)")
    assert result.status == "failed"
    assert result.exit_code == 3
    assert result.stdout == "partial\n"
    assert "bad" in result.stderr


def test_exception_traceback_reaches_stderr(run) -> None:
    result = run("1/0")
    assert result.status == "failed"
    assert "ZeroDivisionError" in result.stderr


def test_inputs_are_readable_but_read_only(run, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "data.csv").write_text("a,b\n1,2\n")
    (inputs / "sub" / "note.txt").write_text("hello")
    code = """
import json, os
out = {"data": open("/work/input/data.csv").read(), "note": open("/work/input/sub/note.txt").read()}
for label, action in [("overwrite", lambda: open("/work/input/data.csv", "w")),
                      ("create", lambda: open("/work/input/new.txt", "w")),
                      ("remove", lambda: os.remove("/work/input/data.csv")),
                      ("chmod", lambda: os.chmod("/work/input/data.csv", 0o666))]:
    try:
        action()
        out[label] = "ALLOWED"
    except OSError as exc:
        out[label] = type(exc).__name__
out["listing"] = sorted(os.listdir("/work/input"))
out["output_empty"] = os.listdir("/work/output") == []
print(json.dumps(out))
"""
    result = run(code, input_dir=inputs)
    assert result.status == "succeeded", result
    seen = json.loads(result.stdout)
    assert seen["data"] == "a,b\n1,2\n" and seen["note"] == "hello"
    for label in ("overwrite", "create", "remove", "chmod"):
        assert seen[label] != "ALLOWED", label
    assert seen["listing"] == ["data.csv", "sub"]
    assert seen["output_empty"] is True


def test_endless_loop_ends_timed_out_within_the_limit(run) -> None:
    began = time.monotonic()
    result = run("while True:\n    pass", wall=5)
    elapsed = time.monotonic() - began
    assert result.status == "timed_out", result
    assert 5 <= result.timings_ms.execute / 1000 < 8
    assert elapsed < 5 + 15


def test_allocating_4_gib_at_once_ends_in_memory_error_never_hangs(run) -> None:
    began = time.monotonic()
    result = run(
        "data = bytearray(4 * 1024 ** 3)\ndata[::4096] = b'x' * (4 * 1024 ** 2)\nprint('survived')", wall=60
    )
    assert time.monotonic() - began < 60
    assert result.status == "out_of_memory" or (
        result.status == "failed" and "MemoryError" in result.stderr
    ), result
    assert "survived" not in result.stdout


def test_filling_memory_page_by_page_ends_out_of_memory(run) -> None:
    # A lowered limit keeps this quick under TCG; the cgroup limit is the same mechanism at 2 GiB.
    code = (
        "chunks = []\nfor _ in range(16):\n    chunks.append(b'x' * (256 * 1024 * 1024))\nprint('survived')"
    )
    began = time.monotonic()
    result = run(code, wall=60, memory_mib=512)
    assert time.monotonic() - began < 60
    assert result.status == "out_of_memory", result
    assert "survived" not in result.stdout
    after = run("print('fine')")
    assert after.status == "succeeded", after


def test_fork_bomb_is_contained_and_the_next_run_works(run) -> None:
    code = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    result = run(code, wall=8)
    assert result.status in ("timed_out", "failed", "out_of_memory"), result
    assert result.error is None or result.status == "timed_out"
    after = run("print('still fine')")
    assert after.status == "succeeded" and after.stdout == "still fine\n"


def test_printing_100_mb_ends_with_truncated_output(run) -> None:
    code = "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(100):\n    sys.stdout.write(chunk)\nprint('done', file=sys.stderr)"
    result = run(code, wall=60)
    assert result.status == "succeeded", result
    assert result.stdout_truncated is True
    cap = get_settings().stdout_cap_bytes
    assert cap <= len(result.stdout.encode()) <= cap + 200
    assert "truncated" in result.stdout[-200:]


def test_25_output_files_keep_20_and_report_the_rest(run, tmp_path: Path) -> None:
    out = tmp_path / "o"
    code = "for i in range(25):\n    open(f'/work/output/f{i:02d}.txt', 'w').write(str(i))"
    result = run(code, out=out)
    assert result.status == "succeeded"
    assert [f.name for f in result.files] == [f"f{i:02d}.txt" for i in range(20)]
    assert sorted(p.name for p in out.iterdir()) == [f"f{i:02d}.txt" for i in range(20)]
    assert [r.name for r in result.rejected_files] == [f"f{i:02d}.txt" for i in range(20, 25)]
    assert all("20 files" in r.reason for r in result.rejected_files)
    assert (out / "f07.txt").read_text() == "7"


def test_60_mb_file_is_rejected_and_small_ones_kept(run, tmp_path: Path) -> None:
    out = tmp_path / "o"
    code = "open('/work/output/big.bin', 'wb').write(b'0' * 60_000_000)\nopen('/work/output/small.txt', 'w').write('ok')"
    result = run(code, out=out, wall=60)
    assert result.status == "succeeded"
    assert [f.name for f in result.files] == ["small.txt"]
    assert [r.name for r in result.rejected_files] == ["big.bin"]
    assert str(MAX_OUTPUT_BYTES) in result.rejected_files[0].reason
    assert sorted(p.name for p in out.iterdir()) == ["small.txt"]


def test_symlinks_special_files_and_escaping_names_are_not_collected(run, tmp_path: Path) -> None:
    out = tmp_path / "o"
    code = """
import os
open("/work/output/ok.txt", "w").write("fine")
os.symlink("/etc/passwd", "/work/output/passwd_link")
open("/work/output/../x", "w").write("escaped")
os.mkdir("/work/output/sub")
open("/work/output/sub/inner.txt", "w").write("nested")
os.mkfifo("/work/output/pipe")
print(sorted(os.listdir("/work/output")))
"""
    result = run(code, out=out)
    assert result.status == "succeeded", result
    assert [f.name for f in result.files] == ["ok.txt"]
    assert sorted(p.name for p in out.iterdir()) == ["ok.txt"]
    reasons = {r.name: r.reason for r in result.rejected_files}
    assert "symbolic link" in reasons["passwd_link"]
    assert "directory" in reasons["sub"]
    assert "regular" in reasons["pipe"]
    assert "x" not in reasons and not (out.parent / "x").exists()
    assert not any((p.name == "passwd") for p in out.rglob("*"))


def test_consecutive_runs_share_nothing_and_get_fresh_randomness(run) -> None:
    code = """
import json, os, random, time
import numpy as np
seen = {p: os.path.exists(p) for p in ["/tmp/marker", "/work/marker", "/work/output/marker.txt"]}
for p in ["/tmp/marker", "/work/marker", "/work/output/marker.txt"]:
    open(p, "w").write("left behind")
print(json.dumps({"seen": seen, "urandom": os.urandom(16).hex(), "random": random.random(),
                  "numpy": float(np.random.random()), "time": time.time(),
                  "boot_id": open("/proc/sys/kernel/random/boot_id").read().strip()}))
"""
    first, second = run(code), run(code)
    assert first.status == second.status == "succeeded"
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert not any(a["seen"].values()) and not any(b["seen"].values())
    assert a["urandom"] != b["urandom"]
    assert a["random"] != b["random"]
    assert a["numpy"] != b["numpy"]
    now = time.time()
    assert abs(b["time"] - now) < 10, "guest wall clock is wrong"


HASH_PROBE = """
import json, os, subprocess, sys

def fresh_interpreter(**env):
    probe = [sys.executable, "-c", "print(hash('cleanroom'))"]
    done = subprocess.run(probe, env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return int(done.stdout)

seed = os.environ.get("PYTHONHASHSEED")
print(json.dumps({"seed": seed, "in_process": hash("cleanroom"), "child": fresh_interpreter(),
                  "same_seed": fresh_interpreter(PYTHONHASHSEED=seed),
                  "other_seed": fresh_interpreter(PYTHONHASHSEED=str(int(seed) % 4294967295 + 1))}))
"""


@pytest.fixture(scope="module")
def two_runs_from_one_saved_state(
    sandbox_image: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict, dict]:
    """Slots are taken round-robin, so one more run than there are slots restores some slot twice. Made once
    for the two tests that read it (five guests, each starting three interpreters under emulation)."""
    seen = {}
    out = tmp_path_factory.mktemp("hash-seed")
    for index in range(get_settings().saved_state_slots + 1):
        result = run_code(
            HASH_PROBE,
            input_dir=None,
            out_dir=out / str(index),
            limits=RunLimits(wall_seconds=30, memory_mib=2048),
        )
        assert result.status == "succeeded", result
        assert result.vm.restored is True  # the fast path
        if result.vm.domain_name in seen:
            return json.loads(seen[result.vm.domain_name].stdout), json.loads(result.stdout)
        seen[result.vm.domain_name] = result
    pytest.fail(f"no two runs restored the same saved state: {sorted(seen)}")


def test_runs_from_one_saved_state_get_their_own_hash_seed_and_the_seed_decides_the_hashes(
    two_runs_from_one_saved_state: tuple[dict, dict],
) -> None:
    a, b = two_runs_from_one_saved_state
    assert a["seed"] != b["seed"]
    assert 1 <= int(a["seed"]) <= 4294967295 and 1 <= int(b["seed"]) <= 4294967295
    # An interpreter started by the user code carries this run's seed: other runs, other hashes ...
    assert a["child"] != b["child"]
    # ... and the seed is what decides it: the same seed again gives the same hash, another seed another.
    assert a["same_seed"] == a["child"] and b["same_seed"] == b["child"]
    assert a["other_seed"] != a["child"] and b["other_seed"] != b["child"]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="user code runs in the pre-forked warm interpreter, whose hash secret was fixed when the saved state "
    "was made (one per slot and image build). It cannot be changed in place: every string and dict made while "
    "warming caches hashes made with it, so a new secret would make lookups of new equal strings miss. A per-run "
    "secret needs a fresh interpreter per run, which imports the stack again. Even the lighter warm-up (numpy, "
    "pandas, matplotlib, scipy.stats, seaborn, sklearn.linear_model; statsmodels no longer pre-imported) costs "
    "2.1 s of CPU natively and 79 s in a restored guest under software emulation (numpy 4.6, pandas 13.9, "
    "matplotlib 11.6, scipy.stats 37.8, seaborn 1.6, scikit-learn 9.9 s; one fresh interpreter, load 5-9 on 2 "
    "cores), against a 3 s goal for a whole run (issue 57; `cleanroom bench sandbox` "
    "fresh_interpreter_stack_import_ms_in_guest). Left: data crafted with a known secret can slow dict/set "
    "operations of runs restored from that one saved state up to their wall limit; interpreters the code starts "
    "get this run's seed (the test above)",
)
def test_the_user_codes_own_interpreter_hashes_differently_in_each_run(
    two_runs_from_one_saved_state: tuple[dict, dict],
) -> None:
    a, b = two_runs_from_one_saved_state
    assert a["in_process"] != b["in_process"]


def test_actions_json_is_returned_separately_only_when_well_formed(run, tmp_path: Path) -> None:
    good = run(
        'import json\njson.dump([{"type": "update", "id": 1}], open("/work/output/actions.json", "w"))\n'
        'open("/work/output/r.txt", "w").write("x")',
        out=tmp_path / "good",
    )
    assert good.status == "succeeded"
    assert good.actions == [{"type": "update", "id": 1}]
    assert [f.name for f in good.files] == ["r.txt"]
    assert not (tmp_path / "good" / "actions.json").exists()

    bad = run('open("/work/output/actions.json", "w").write("{not json")')
    assert bad.actions is None
    assert any(r.name == "actions.json" and "malformed" in r.reason for r in bad.rejected_files)

    unread = run('open("/work/output/actions.json", "w").write("[]")', read_actions=False)
    assert unread.actions is None and unread.actions_discarded is True


def test_two_runs_at_once_both_succeed(run) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda i: run(f"print({i})"), range(2)))
    assert [r.status for r in results] == ["succeeded", "succeeded"]
    assert [r.stdout for r in results] == ["0\n", "1\n"]
    assert results[0].vm.domain_name != results[1].vm.domain_name


def test_cold_boot_path_when_no_saved_state(run) -> None:
    result = run(
        "import os, pandas\nprint(os.getuid(), sorted(os.listdir('/sys/class/net')))", force_cold_boot=True
    )
    assert result.status == "succeeded", result
    assert result.vm.restored is False
    assert result.vm.domain_name.startswith("cleanroom-run-") and "slot" not in result.vm.domain_name
    assert result.stdout == "1000 ['lo']\n"
    assert result.vm.nics == 0


def test_health_reports_virt_type_image_and_saved_states() -> None:
    from backend.sandbox.libvirt_conn import owner_token
    from backend.sandbox.recovery import running_domains

    # the count is the machine's: another checkout's suite may start and stop guests meanwhile, so it is
    # compared with libvirt's list taken just before and after (until the two agree)
    for _ in range(50):
        before = running_domains()
        info = health()
        if running_domains() == before:
            break
        time.sleep(0.2)
    else:
        pytest.fail("libvirt's list of guests never held still for one health() call")
    assert info["virt_type"] in ("kvm", "qemu")
    assert info["image"]["hash"]
    assert info["saved_state"]["ready"] == info["saved_state"]["slots"] > 0
    assert info["running_vms"] == len(before)
    assert running_domains(owner=owner_token()) == []  # none of this suite's guests outlived its test


def test_recover_leftovers_destroys_stray_domains_and_files_of_dead_owners() -> None:
    from dataclasses import replace

    from backend import filemodes
    from backend.sandbox.domain import DomainSpec, render_domain_xml
    from backend.sandbox.image import current_image
    from backend.sandbox.libvirt_conn import connection, destroy_quietly, owner_token
    from backend.sandbox.virt import resolve_virt_type

    image = current_image()
    run_dir = get_settings().effective_run_dir
    specs = {}
    for label in ("dead", "live"):
        stray = filemodes.guest_workdir(run_dir / f"cleanroom-run-stray-{label}")
        for disk in ("job.img", "out.img"):
            with open(stray / disk, "wb") as fh:
                fh.truncate(1 << 20)
        spec = DomainSpec.for_run(
            stray.name, str(uuid.uuid4()), "stray", image, resolve_virt_type(image), stray, owner_token()
        )
        if label == "dead":  # a process that no longer exists (pid 1 never has this start time)
            spec = replace(spec, owner="1:0")
            (stray / "owner").write_text("1:0")
        else:
            (stray / "owner").write_text(spec.owner)
        specs[label] = spec
    with connection() as conn:
        try:
            for spec in specs.values():
                conn.createXML(render_domain_xml(spec), 0)
            removed = recover_leftovers()
            assert "domain cleanroom-run-stray-dead" in removed
            assert not (run_dir / "cleanroom-run-stray-dead").exists()
            # A live process's run is not a leftover.
            assert "domain cleanroom-run-stray-live" not in removed
            assert (run_dir / "cleanroom-run-stray-live").exists()
        finally:
            for spec in specs.values():
                destroy_quietly(conn, spec.name)
            shutil.rmtree(run_dir / "cleanroom-run-stray-live", ignore_errors=True)
            shutil.rmtree(run_dir / "cleanroom-run-stray-dead", ignore_errors=True)


def test_standby_pool_runs_are_fresh_and_nothing_outlives_the_pool(run) -> None:
    from backend.sandbox import start_standby_pool, stop_standby_pool
    from backend.sandbox.standby import standby_ready

    code = "import os, random\nopen('/tmp/seen', 'a').write('x')\nprint(os.urandom(8).hex(), random.random(), open('/tmp/seen').read())"
    start_standby_pool(1)
    try:
        deadline = time.monotonic() + 120
        while standby_ready() < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        first = run(code)
        while standby_ready() < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        second = run(code)
    finally:
        stop_standby_pool()
    assert first.status == second.status == "succeeded"
    assert first.vm.standby and second.vm.standby and first.vm.restored
    assert first.vm.run_id != second.vm.run_id
    a, b = first.stdout.split(), second.stdout.split()
    assert a[0] != b[0] and a[1] != b[1]
    assert a[2] == b[2] == "x"
    assert first.vm.nics == 0 and first.vm.guest_interfaces == ["lo"]
