"""The guest kernel surface left to user code: the calls that start most guest kernel exploits (user
namespaces, io_uring, keyrings, eBPF, mount, ptrace, module loading, ...) are refused by the agent's
seccomp filter, and in the same run everything a data script does (threads, processes, subprocesses,
numpy with its BLAS threads, pandas, a matplotlib chart) still works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.sandbox.models import RunLimits
from backend.sandbox.runner import _run
from tests.support.guest import load_guest_agent

pytestmark = pytest.mark.vm  # real VMs: the serial group (tests/conftest.py SERIAL_PATHS)

PROBE = r"""
import ctypes, errno, json, multiprocessing, os, subprocess, threading
from concurrent.futures import ThreadPoolExecutor

DENIED = json.loads(DENIED_JSON)
SKIP = json.loads(SKIP_JSON)
libc = ctypes.CDLL(None, use_errno=True)
SIGCHLD = 17
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000


def outcome(res):
    return "ok" if res >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def syscall(nr, *args):
    ctypes.set_errno(0)
    return outcome(libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args)))


def clone(flags):
    # the raw call, as fork() would make it but with namespace flags; a child (if any) leaves at once
    ctypes.set_errno(0)
    res = libc.syscall(*(ctypes.c_long(a) for a in (56, flags | SIGCHLD, 0, 0, 0, 0)))
    if res == 0:
        os._exit(0)
    if res > 0:
        os.waitpid(res, 0)
    return outcome(res)


def unshare(flags):
    ctypes.set_errno(0)
    return outcome(libc.unshare(ctypes.c_int(flags)))


params = ctypes.create_string_buffer(120)  # struct io_uring_params
refused = {
    "unshare(CLONE_NEWUSER)": unshare(CLONE_NEWUSER),
    "unshare(CLONE_NEWNS|CLONE_NEWNET)": unshare(CLONE_NEWNS | CLONE_NEWNET),
    "io_uring_setup": syscall(425, 1, ctypes.addressof(params)),
    "keyctl(GET_KEYRING_ID, session)": syscall(250, 0, -3, 1),
    "clone(CLONE_NEWNET)": clone(CLONE_NEWNET),
    "clone(CLONE_NEWUSER)": clone(CLONE_NEWUSER),
    "clone3": syscall(435, 0, 0),
}
every_denied = {name: syscall(nr, 0, 0, 0, 0, 0, 0) for name, nr in DENIED.items() if name not in SKIP}
status = {k: v.strip() for k, v in (line.split(":", 1) for line in open("/proc/self/status"))}
sysctls = {}
for key in ["user/max_user_namespaces", "kernel/unprivileged_bpf_disabled", "kernel/io_uring_disabled"]:
    try:
        sysctls[key] = open(f"/proc/sys/{key}").read().strip()
    except OSError as exc:
        sysctls[key] = type(exc).__name__

# Positive controls, under the same filter.
counter = [0]
lock = threading.Lock()


def bump():
    for _ in range(1000):
        with lock:
            counter[0] += 1


threads = [threading.Thread(target=bump) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with ThreadPoolExecutor(4) as pool:
    futures_sum = sum(pool.map(lambda x: x * x, range(10)))


def square(x):
    return x * x


with multiprocessing.Pool(2) as pool:
    pool_result = pool.map(square, range(10))
child = subprocess.run(["python3", "-c", "print(1)"], capture_output=True, text=True)
pid = os.fork()
if pid == 0:
    os._exit(7)
fork_status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

a = np.arange(300 * 300, dtype=float).reshape(300, 300) / 1e5
blas = float((a @ a.T).trace())  # OpenBLAS starts its worker threads here (OPENBLAS_NUM_THREADS=2)
frame = pd.DataFrame({"region": ["north", "south", "north"], "amount": [1, 2, 3]})
totals = frame.groupby("region")["amount"].sum()
totals.plot.bar()
plt.savefig("/work/output/chart.png")

print(json.dumps({
    "refused": refused,
    "every_denied": every_denied,
    "status": {k: status[k] for k in ("NoNewPrivs", "Seccomp", "Uid")},
    "sysctls": sysctls,
    "threads": counter[0],
    "futures": futures_sum,
    "pool": pool_result,
    "subprocess": [child.returncode, child.stdout],
    "fork": fork_status,
    "blas": blas > 0,
    "totals": totals.to_dict(),
}))
"""


def test_user_code_is_refused_namespaces_io_uring_keyrings_and_the_rest_while_python_still_works(run) -> None:
    agent = load_guest_agent()
    code = PROBE.replace("DENIED_JSON", repr(json.dumps(agent.DENIED_SYSCALLS))).replace("SKIP_JSON", "'[]'")
    result = run(code, wall=180)
    assert result.status == "succeeded", (result.stdout, result.stderr)
    seen = json.loads(result.stdout)

    assert seen["refused"] == {
        "unshare(CLONE_NEWUSER)": "EPERM",
        "unshare(CLONE_NEWNS|CLONE_NEWNET)": "EPERM",
        "io_uring_setup": "EPERM",
        "keyctl(GET_KEYRING_ID, session)": "EPERM",
        "clone(CLONE_NEWNET)": "EPERM",
        "clone(CLONE_NEWUSER)": "EPERM",
        "clone3": "ENOSYS",  # so that glibc falls back to clone, whose flags the filter reads
    }, seen["refused"]
    assert seen["every_denied"] == dict.fromkeys(agent.DENIED_SYSCALLS, "EPERM"), seen["every_denied"]
    assert seen["status"]["NoNewPrivs"] == "1"
    assert seen["status"]["Seccomp"] == "2"  # filter mode
    assert seen["status"]["Uid"].split()[0] != "0"
    assert seen["sysctls"]["user/max_user_namespaces"] == "0"
    assert seen["sysctls"]["kernel/unprivileged_bpf_disabled"] == "1"
    assert seen["sysctls"]["kernel/io_uring_disabled"] in ("2", "FileNotFoundError")  # the switch is 6.6+

    # Positive controls in the same filtered run.
    assert seen["threads"] == 8000
    assert seen["futures"] == 285
    assert seen["pool"] == [x * x for x in range(10)]
    assert seen["subprocess"] == [0, "1\n"]
    assert seen["fork"] == 7
    assert seen["blas"] is True
    assert seen["totals"] == {"north": 4, "south": 2}
    assert [f.name for f in result.files] == ["chart.png"]


def test_control_the_same_probe_without_the_filter_sees_the_calls_reach_the_kernel(tmp_path: Path) -> None:
    """The positive control: the same probe in a run whose user code has no syscall filter (a switch only
    `runner._run` has; the API and `run_code` cannot set it). The kernel itself now answers: io_uring and
    keyrings work, and the listed calls fail for the kernel's own reasons, not all with the filter's EPERM;
    so the test above would notice the filter missing."""
    agent = load_guest_agent()
    # without the filter ptrace(PTRACE_TRACEME) succeeds, and the agent, now the tracer, would stop the
    # probe's next exec: that one call is left out of the control
    skip = ["ptrace"]
    code = PROBE.replace("DENIED_JSON", repr(json.dumps(agent.DENIED_SYSCALLS))).replace(
        "SKIP_JSON", repr(json.dumps(skip))
    )
    result = _run(
        code,
        None,
        tmp_path / "out",
        RunLimits(wall_seconds=180, memory_mib=2048),
        read_actions=False,
        positive_control_unfiltered=True,
    )
    assert result.status == "succeeded", (result.stdout, result.stderr)
    seen = json.loads(result.stdout)
    assert seen["status"]["Seccomp"] == "0"  # no filter
    assert seen["refused"]["io_uring_setup"] == "ok"
    assert seen["refused"]["keyctl(GET_KEYRING_ID, session)"] != "EPERM"
    assert seen["refused"]["clone3"] != "ENOSYS"
    assert seen["every_denied"] != {name: "EPERM" for name in agent.DENIED_SYSCALLS if name not in skip}
    assert seen["sysctls"]["user/max_user_namespaces"] == "0"  # the sysctls stay: they are not the filter
    assert seen["totals"] == {"north": 4, "south": 2}


def test_the_unfiltered_switch_is_reachable_only_from_the_sandbox_runner() -> None:
    """No request, job or run row can turn the filter off: the only code that names the switch is the
    runner's private `_run` (which the VM suite calls) and the VM that writes it into the job."""
    import backend

    root = Path(backend.__file__).parent
    naming = sorted(
        str(path.relative_to(root)) for path in root.rglob("*.py") if "unfiltered_control" in path.read_text()
    )
    assert naming == ["sandbox/runner.py", "sandbox/vm.py"]
    from backend.sandbox import run_code

    assert (
        "positive_control_unfiltered" not in run_code.__code__.co_varnames
    )  # the public entry has no such door
