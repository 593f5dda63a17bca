"""The host and the guest agent speak the same disk protocol: the real agent, loaded from the image
recipe, reads a job disk written by `wire.py`, and what it writes back `wire.py` and `output` accept.
No VM: the agent's disk paths are pointed at files."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

from backend.sandbox import wire
from backend.sandbox.models import MAX_ACTIONS_BYTES, MAX_OUTPUT_BYTES, RunLimits, VmInfo
from backend.sandbox.output import STDOUT_MARKER, guest_limits, interpret
from backend.settings import get_settings

PROTOCOL_CONSTANTS = [
    "BLOCK",
    "JOB_MAGIC",
    "WARM_MAGIC",
    "READY_MAGIC",
    "RESULT_MAGIC",
    "RESULT_HEADER_OFFSET",
    "RESULT_JSON_OFFSET",
    "RESULT_JSON_MAX",
    "RESULT_PAYLOAD_OFFSET",
]


@pytest.fixture
def disks(guest_agent: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A job disk and an output disk as files, wired in as the agent's /dev/vdb and /dev/vdc."""
    job, out = tmp_path / "job.img", tmp_path / "out.img"
    with open(job, "wb") as fh:
        fh.truncate(4 * 1024 * 1024)
    wire.create_output_disk(out, 8 * 1024 * 1024)
    try:
        os.close(os.open(job, os.O_RDONLY | os.O_DIRECT))
    except OSError as exc:  # a filesystem without O_DIRECT (older tmpfs): read through the cache
        if exc.errno != errno.EINVAL:
            raise
        monkeypatch.setattr(os, "O_DIRECT", 0)
    monkeypatch.setattr(guest_agent, "JOB_DEV", str(job))
    monkeypatch.setattr(guest_agent, "OUT_DEV", str(out))
    return job, out


@pytest.mark.parametrize("name", PROTOCOL_CONSTANTS)
def test_the_agent_and_the_host_agree_on_every_protocol_constant(guest_agent: ModuleType, name: str) -> None:
    assert getattr(guest_agent, name) == getattr(wire, name)


def test_a_job_written_by_the_host_is_read_whole_by_the_agent(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    job_disk, _ = disks
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "sales.csv").write_bytes(b"region,amount\nnorth,3\n")
    (inputs / "sub" / "note.txt").write_bytes("naïve\n".encode())
    record = {"run_id": "r1", "nonce": "n1", "code": "print(1)", "limits": guest_limits(RunLimits())}
    wire.write_job_disk(job_disk, 4 * 1024 * 1024, record, wire.input_files(inputs), in_place=True)

    job, payload, _detected = guest_agent.wait_for_job()

    assert {k: job[k] for k in record} == record
    files = {item["name"]: payload[item["offset"] : item["offset"] + item["size"]] for item in job["inputs"]}
    assert files == {"sales.csv": b"region,amount\nnorth,3\n", "sub/note.txt": "naïve\n".encode()}
    assert job["limits"]["stdout_cap"] == get_settings().stdout_cap_bytes
    assert job["limits"]["max_total_bytes"] == MAX_OUTPUT_BYTES


def test_only_a_boot_without_a_job_warms_so_saved_states_stay_warm_and_cold_boots_skip_it(
    guest_agent: ModuleType, disks: tuple[Path, Path]
) -> None:
    """A template boot (its job disk empty, then saved) must warm; a cold boot for one run, whose job the host
    wrote before the start, skips the imports its code may never use."""
    job_disk, _ = disks
    assert guest_agent.job_waiting() is False  # the template's empty disk: warm() runs
    record = {"run_id": "r1", "nonce": "n1", "code": "print(1)", "limits": guest_limits(RunLimits())}
    wire.write_job_disk(job_disk, 4 * 1024 * 1024, record, [], in_place=True)
    assert guest_agent.job_waiting() is True


def test_ready_and_warm_blocks_written_by_the_agent_are_read_by_the_host(
    guest_agent: ModuleType, disks: tuple[Path, Path]
) -> None:
    _, out = disks
    guest_agent.write_block0(guest_agent.WARM_MAGIC, {"interfaces": ["lo"], "warm_ms": 1})
    assert wire.read_block0(out, wire.WARM_MAGIC) == {"interfaces": ["lo"], "warm_ms": 1}
    guest_agent.write_block0(guest_agent.READY_MAGIC, {"nonce": "n1", "interfaces": ["lo"]})
    assert wire.read_block0(out, wire.READY_MAGIC) == {"nonce": "n1", "interfaces": ["lo"]}
    assert wire.read_block0(out, wire.WARM_MAGIC) is None


def test_a_result_written_by_the_agent_becomes_the_run_result_on_the_host(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = disks
    cap = get_settings().stdout_cap_bytes
    stdout = guest_agent.Capture(cap)
    stdout.feed(b"x" * (cap + 10))  # more than the cap: the agent keeps the first `cap` bytes
    stderr = guest_agent.Capture(cap)
    stderr.feed(b"warning\n")
    chart = b"\x89PNG fake"
    actions = json.dumps([{"type": "update", "id": 1}]).encode()
    record = {
        "nonce": "n1",
        "exit_code": 0,
        "timed_out": False,
        "oom_kills": 0,
        "stdout_truncated": stdout.truncated,
        "stderr_truncated": stderr.truncated,
        "actions_present": True,
        "files": [{"name": "chart.png", "size": len(chart), "sha256": hashlib.sha256(chart).hexdigest()}],
        "rejected": [{"name": "link", "reason": "symbolic link (not collected)"}],
        "interfaces": ["lo"],
        "timings_ms": {"ready": 1.0, "execute": 2.0, "collect": 3.0},
    }
    guest_agent.write_result(record, [bytes(stdout.data), bytes(stderr.data), actions, chart])

    guest = wire.read_result(out)
    assert guest is not None
    assert guest.record["nonce"] == "n1"
    assert guest.blob(2, MAX_ACTIONS_BYTES) == actions
    result = interpret(guest, "n1", VmInfo(), tmp_path / "out", read_actions=True)
    assert result.status == "succeeded" and result.exit_code == 0
    assert result.stdout == "x" * cap + STDOUT_MARKER.format(cap=cap)
    assert result.stdout_truncated is True
    assert result.stderr == "warning\n"
    assert result.actions == [{"type": "update", "id": 1}]
    assert [(f.name, f.size) for f in result.files] == [("chart.png", len(chart))]
    assert (tmp_path / "out" / "chart.png").read_bytes() == chart
    assert [(r.name, r.reason) for r in result.rejected_files] == [("link", "symbolic link (not collected)")]
    assert result.vm.guest_interfaces == ["lo"]


def test_the_agents_last_words_are_an_error_result_on_the_host(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = disks
    guest_agent.write_result({"agent_error": "OSError('mount failed')", "nonce": "n1"}, [])
    guest = wire.read_result(out)
    result = interpret(guest, "n1", VmInfo(), tmp_path / "out", read_actions=True)
    assert result.status == "error"
    assert result.error == "guest agent failed: OSError('mount failed')"


def test_a_result_for_another_job_is_refused(
    guest_agent: ModuleType, disks: tuple[Path, Path], tmp_path: Path
) -> None:
    _, out = disks
    guest_agent.write_result({"nonce": "old", "exit_code": 0}, [b"", b"", b""])
    result = interpret(wire.read_result(out), "n1", VmInfo(), tmp_path / "out", read_actions=True)
    assert result.status == "error" and "another job" in result.error


# ---------------------------------------------------------------- the syscall filter on user code

# glibc's pthread_create: VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
CLONE_THREAD_FLAGS = 0x3D0F00
FORK_FLAGS = 0x01200011  # glibc's fork(): SIGCHLD|CHILD_SETTID|CHILD_CLEARTID
AUDIT_ARCH_I386 = 0x40000003


def run_filter(agent: ModuleType, nr: int, arch: int | None = None, arg0: int = 0) -> int:
    """Classic BPF, evaluated on one seccomp_data the way the kernel does, for the few opcodes the filter
    uses: the filter's decision for a call, without installing it."""
    data = {
        agent.SECCOMP_DATA_NR: nr & 0xFFFFFFFF,
        agent.SECCOMP_DATA_ARCH: agent.AUDIT_ARCH_X86_64 if arch is None else arch,
        agent.SECCOMP_DATA_ARG0_LOW: arg0 & 0xFFFFFFFF,
    }
    program = agent.syscall_filter()
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == agent.BPF_RET_K:
            return k
        if code == agent.BPF_LD_W_ABS:
            acc = data[k]
            pc += 1
            continue
        taken = {
            agent.BPF_JEQ_K: acc == k,
            agent.BPF_JGE_K: acc >= k,
            agent.BPF_JSET_K: bool(acc & k),
        }[code]
        pc += 1 + (jt if taken else jf)


def test_the_syscall_filter_is_well_formed_and_checks_the_architecture_first(guest_agent: ModuleType) -> None:
    program = guest_agent.syscall_filter()
    assert 0 < len(program) <= guest_agent.BPF_MAXINSNS
    known = {guest_agent.BPF_LD_W_ABS, guest_agent.BPF_JEQ_K, guest_agent.BPF_JGE_K}
    known |= {guest_agent.BPF_JSET_K, guest_agent.BPF_RET_K}
    for index, (code, jt, jf, _k) in enumerate(program):
        assert code in known
        if code != guest_agent.BPF_RET_K:  # every path goes forward and ends in a return
            assert index + 1 + max(jt, jf) < len(program)
    assert program[-1][0] == guest_agent.BPF_RET_K
    # Instruction 0 loads the architecture, instruction 1 compares it; a mismatch kills the process.
    assert program[0] == (guest_agent.BPF_LD_W_ABS, 0, 0, guest_agent.SECCOMP_DATA_ARCH)
    code, jt, jf, k = program[1]
    assert (code, jt, k) == (guest_agent.BPF_JEQ_K, 0, guest_agent.AUDIT_ARCH_X86_64)
    assert program[2 + jf] == (guest_agent.BPF_RET_K, 0, 0, guest_agent.SECCOMP_RET_KILL_PROCESS)
    compared = {k for code, _jt, _jf, k in program if code == guest_agent.BPF_JEQ_K}
    for name in [
        "unshare",
        "setns",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "keyctl",
        "add_key",
    ]:
        assert guest_agent.DENIED_SYSCALLS[name] in compared, name
    assert (
        set(guest_agent.DENIED_SYSCALLS.values()) | {guest_agent.SYS_CLONE, guest_agent.SYS_CLONE3}
        <= compared
    )
    # x86_64 numbers, spot-checked against the kernel's syscall_64.tbl
    assert (
        guest_agent.DENIED_SYSCALLS["unshare"] == 272 and guest_agent.DENIED_SYSCALLS["io_uring_setup"] == 425
    )
    assert guest_agent.DENIED_SYSCALLS["keyctl"] == 250 and guest_agent.DENIED_SYSCALLS["bpf"] == 321
    assert (guest_agent.SYS_CLONE, guest_agent.SYS_CLONE3) == (56, 435)


def test_the_syscall_filter_refuses_the_listed_calls_and_namespace_clones_and_allows_the_rest(
    guest_agent: ModuleType,
) -> None:
    eperm = guest_agent.SECCOMP_RET_ERRNO | errno.EPERM
    enosys = guest_agent.SECCOMP_RET_ERRNO | errno.ENOSYS
    allow = guest_agent.SECCOMP_RET_ALLOW
    for name, nr in guest_agent.DENIED_SYSCALLS.items():
        assert run_filter(guest_agent, nr) == eperm, name
    expected = {
        "ptrace", "mount", "umount2", "pivot_root", "swapon", "swapoff", "reboot", "init_module",
        "finit_module", "delete_module", "kexec_load", "kexec_file_load", "add_key", "request_key", "keyctl",
        "unshare", "setns", "perf_event_open", "open_by_handle_at", "bpf", "userfaultfd", "io_uring_setup",
        "io_uring_enter", "io_uring_register",
    }  # fmt: skip
    assert expected <= set(guest_agent.DENIED_SYSCALLS)
    assert run_filter(guest_agent, guest_agent.SYS_CLONE3) == enosys  # glibc falls back to clone
    for flag in ["NEWUSER", "NEWNS", "NEWNET", "NEWPID", "NEWIPC", "NEWUTS", "NEWCGROUP"]:
        flags = FORK_FLAGS | getattr(guest_agent, f"CLONE_{flag}")
        assert run_filter(guest_agent, guest_agent.SYS_CLONE, arg0=flags) == eperm, flag
    assert run_filter(guest_agent, guest_agent.SYS_CLONE, arg0=CLONE_THREAD_FLAGS) == allow
    assert run_filter(guest_agent, guest_agent.SYS_CLONE, arg0=FORK_FLAGS) == allow
    for nr in [
        0,
        1,
        2,
        9,
        57,
        59,
        61,
        231,
        318,
        334,
    ]:  # read write open mmap fork execve wait4 exit_group ...
        assert run_filter(guest_agent, nr) == allow, nr
    assert run_filter(guest_agent, 272 | guest_agent.X32_SYSCALL_BIT) == enosys  # x32 numbering
    assert run_filter(guest_agent, -1) == enosys
    # An i386 call (int 0x80) is judged by its own numbers: 0 is restart_syscall; the process is killed.
    assert run_filter(guest_agent, 0, arch=AUDIT_ARCH_I386) == guest_agent.SECCOMP_RET_KILL_PROCESS


PROBE = r"""
import ctypes, errno, json, subprocess, sys, threading
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, sys.argv[1])
from tests.support.guest import load_guest_agent

agent = load_guest_agent()
if sys.argv[2] == "filtered":
    agent.install_syscall_filter()
libc = ctypes.CDLL(None, use_errno=True)


def call(nr, *args):
    ctypes.set_errno(0)
    res = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    return "ok" if res >= 0 else errno.errorcode[ctypes.get_errno()]


seen = {"unshare_newuser": call(272, 0x10000000), "clone3": call(435, 0, 0)}
with ThreadPoolExecutor(4) as pool:
    seen["threads"] = sum(pool.map(abs, [-1, -2, -3, -4]))
seen["subprocess"] = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, text=True).stdout
seen["status"] = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status")) if k == "Seccomp"}
print(json.dumps(seen))
"""


def test_the_installed_filter_refuses_unshare_in_a_child_on_this_host(tmp_path: Path) -> None:
    """The real kernel judges the real filter: a child process installs it (as the agent does before the
    user code) and unshare(CLONE_NEWUSER) fails with EPERM; the control child without it may unshare."""
    import platform
    import subprocess
    import sys

    if platform.machine() != "x86_64":
        pytest.skip("the filter is written for the x86_64 guest")
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    repo = str(Path(__file__).resolve().parents[2])  # where `tests.support` imports from
    results = {}
    for mode in ["filtered", "control"]:
        done = subprocess.run(
            [sys.executable, str(probe), repo, mode], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        results[mode] = json.loads(done.stdout)
    filtered, control = results["filtered"], results["control"]
    assert filtered["unshare_newuser"] == "EPERM"
    assert filtered["clone3"] == "ENOSYS"
    assert filtered["status"] == {"Seccomp": "2"}
    assert filtered["threads"] == control["threads"] == 10
    assert filtered["subprocess"] == control["subprocess"] == "1\n"
    assert control["status"] == {"Seccomp": "0"}
    assert control["clone3"] == "EINVAL"  # the kernel's own answer to a NULL clone_args
    if control["unshare_newuser"] != "ok":
        pytest.skip(f"this host refuses user namespaces by itself ({control['unshare_newuser']}): no control")
    assert control["unshare_newuser"] == "ok"


def test_the_user_environment_carries_a_hash_seed_derived_from_each_jobs_seed(
    guest_agent: ModuleType,
) -> None:
    seeds = [os.urandom(64) for _ in range(50)] + [bytes(64), b"\xff" * 64]
    values = [guest_agent.hash_seed(seed) for seed in seeds]
    assert all(1 <= value <= 0xFFFFFFFF for value in values)  # 0 would turn randomization off
    assert len(set(values)) == len(values)
    assert guest_agent.hash_seed(seeds[0]) == values[0]  # one job, one seed

    first, second = (guest_agent.user_env(value) for value in values[:2])
    assert first["PYTHONHASHSEED"] == str(values[0]) != second["PYTHONHASHSEED"]
    assert {k: v for k, v in first.items() if k != "PYTHONHASHSEED"} == guest_agent.USER_ENV
    assert "PYTHONHASHSEED" not in guest_agent.USER_ENV  # the fixed part holds no seed to share
    for bad in [0, -1, 2**32]:
        with pytest.raises(ValueError):
            guest_agent.user_env(bad)


def test_the_hash_seed_in_the_user_environment_decides_a_fresh_interpreters_hashes(
    guest_agent: ModuleType,
) -> None:
    """The environment as built is accepted by a real interpreter: the same seed gives the same
    str hash (the control that the seed is what decides it), another seed another hash."""
    import subprocess
    import sys

    def hash_under(value: int) -> str:
        env = guest_agent.user_env(value) | {"HOME": os.environ.get("HOME", "/")}
        done = subprocess.run(
            [sys.executable, "-S", "-c", "print(hash('cleanroom'))"], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    a, b = guest_agent.hash_seed(b"a" * 64), guest_agent.hash_seed(b"b" * 64)
    assert hash_under(a) == hash_under(a)
    assert hash_under(a) != hash_under(b)
