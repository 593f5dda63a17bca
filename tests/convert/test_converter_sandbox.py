"""The converter child runs inside bubblewrap and under a seccomp filter, so a hostile file that gets code
running in a parser still cannot reach the network, write outside its scratch folder, read the password
hashes, or reach for io_uring and new namespaces.

The adversary is a probe that sets itself up exactly as `worker.main` does (`spawn_confined`, then
`enter_confinement`) and then acts as the file's code would. Each refusal has a positive control: the
same probe run as a plain root subprocess succeeds, so removing the sandbox would fail these tests."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.convert import convert
from backend.convert import worker as convert_worker
from backend.convert.worker import convert_isolated, spawn_confined
from backend.settings import get_settings

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="the converter sandbox needs a root service and bwrap (Debian package bubblewrap)",
)

PROBE = r"""
import ctypes, errno, json, os, socket, subprocess, sys
mode, port, targets = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
if mode == "confined":
    from backend.convert.worker import enter_confinement
    enter_confinement(1 << 30)
libc = ctypes.CDLL(None, use_errno=True)
namespaces = ("mnt", "net", "ipc", "pid", "uts")
result = {"uid": os.getuid(), "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in namespaces}}
def attempt(name, fn):
    try:
        result[name] = fn()
    except OSError as exc:
        result[name] = errno.errorcode.get(exc.errno, type(exc).__name__)
def syscall(nr, *args):
    if libc.syscall(nr, *args) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "done"
def inet():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        return "connected"
def unix():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM):
        return "created"
def write(path):
    with open(path, "w") as fh:
        return fh.write("planted")
def shadow():
    with open("/etc/shadow") as fh:
        return fh.read().split(":")[0]  # "root" when the hashes are readable
attempt("inet", inet)
attempt("unix", unix)
for target in targets:
    attempt("write " + target, lambda: write(target))
attempt("write scratch", lambda: write("scratch.txt"))
attempt("shadow", shadow)
params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
attempt("io_uring_setup", lambda: syscall(425, 8, params))
attempt("unshare", lambda: syscall(272, 0x10000000))  # unshare(CLONE_NEWUSER)
def child_seccomp():  # what a program the converter starts (like pdftoppm) is under
    grep = subprocess.run(["grep", "Seccomp:", "/proc/self/status"], capture_output=True, text=True)
    return grep.stdout.split()
attempt("child_seccomp", child_seccomp)
print(json.dumps(result))
"""


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections: what a converter might try to phone home to."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        yield server.getsockname()[1]


@pytest.fixture
def targets() -> Iterator[list[str]]:
    """Places outside the scratch folder a converter must not write: world-writable /var/tmp, the host's
    /tmp, and the service's data directory. Whatever a run leaves there is removed afterwards."""
    name = f"cleanroom-probe-{uuid.uuid4().hex}"
    paths = [f"/var/tmp/{name}", f"{tempfile.gettempdir()}/{name}", str(get_settings().data_dir / name)]
    yield paths
    for path in paths:
        Path(path).unlink(missing_ok=True)


def run_confined(port: int, targets: list[str]) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    try:
        process = spawn_confined(
            [sys.executable, "-c", PROBE, "confined", str(port), json.dumps(targets)], workdir
        )
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
        assert (workdir / "scratch.txt").read_text() == "planted"  # its own folder is where it may write
        return json.loads(out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_plain(port: int, targets: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "plain", str(port), json.dumps(targets)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.mkdtemp(prefix="cleanroom-probe-plain-"),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def own_namespaces() -> dict[str, str]:
    return {n: os.readlink(f"/proc/self/ns/{n}") for n in ("mnt", "net", "ipc", "pid", "uts")}


def test_the_probe_runs_in_its_own_namespaces_as_the_converter_user(listener, targets) -> None:
    result = run_confined(listener, targets)
    mine = own_namespaces()
    assert all(result["ns"][n] != mine[n] for n in mine), (result["ns"], mine)
    assert result["uid"] == convert_worker.converter_identity()[0] != 0
    assert result["child_seccomp"] == ["Seccomp:", "2"]  # grep, started by the probe, is filtered too


def test_positive_control_a_plain_subprocess_shares_our_namespaces_unfiltered(listener, targets) -> None:
    result = run_plain(listener, targets)
    assert result["ns"] == own_namespaces()
    assert result["uid"] == 0
    assert result["child_seccomp"] == ["Seccomp:", "0"]


def test_a_hostile_converter_cannot_open_a_network_socket(listener, targets) -> None:
    result = run_confined(listener, targets)
    assert result["inet"] == "EPERM"  # seccomp: socket(AF_INET) refused before any connect
    assert result["unix"] == "created"  # AF_UNIX stays allowed: libraries use it locally


def test_positive_control_the_same_probe_unconfined_connects(listener, targets) -> None:
    assert run_plain(listener, targets)["inet"] == "connected"


def test_a_hostile_converter_cannot_write_outside_its_scratch_folder(listener, targets) -> None:
    result = run_confined(listener, targets)
    for target in targets:
        assert result[f"write {target}"] in ("EROFS", "ENOENT", "EACCES"), (target, result)
        assert not Path(target).exists(), target


def test_positive_control_the_same_probe_unconfined_writes_there(listener, targets) -> None:
    result = run_plain(listener, targets)
    for target in targets:
        assert result[f"write {target}"] == len("planted"), (target, result)
        assert Path(target).read_text() == "planted"


def test_a_hostile_converter_cannot_read_the_password_hashes(listener, targets) -> None:
    assert run_confined(listener, targets)["shadow"] == "EACCES"


def test_even_a_converter_left_running_as_root_reads_no_hashes_and_writes_nowhere(
    listener, targets, monkeypatch
) -> None:
    """The fallback for a checkout only root can read (`unreadable_code()`): no drop, the sandbox remains."""
    monkeypatch.setattr(convert_worker, "converter_identity", lambda: None)
    result = run_confined(listener, targets)
    assert result["uid"] == 0
    assert result["shadow"] == "EACCES"  # /dev/null over it, on a nodev mount: not even root opens it
    assert result["inet"] == "EPERM"
    assert result[f"write {targets[0]}"] in ("EROFS", "ENOENT")  # /var/tmp
    assert not any(Path(t).exists() for t in targets)  # root may write its fresh /tmp, which dies with it


def test_positive_control_the_same_probe_unconfined_reads_the_hashes(listener, targets) -> None:
    assert run_plain(listener, targets)["shadow"] == "root"


io_uring_off = Path("/proc/sys/kernel/io_uring_disabled")
needs_io_uring = pytest.mark.skipif(
    io_uring_off.exists() and io_uring_off.read_text().strip() == "2", reason="io_uring is disabled here"
)


@needs_io_uring
def test_a_hostile_converter_cannot_set_up_io_uring_or_new_namespaces(listener, targets) -> None:
    result = run_confined(listener, targets)
    assert result["io_uring_setup"] == "EPERM"
    assert result["unshare"] == "EPERM"


@needs_io_uring
def test_positive_control_the_same_probe_unconfined_gets_io_uring_and_a_user_namespace(
    listener, targets
) -> None:
    result = run_plain(listener, targets)
    assert result["io_uring_setup"] == "done"
    assert result["unshare"] == "done"


# --- the converters still work inside, and the fallback ---------------------------------------------------


def scanned_pdf() -> bytes:
    """A one-page PDF that is only an image: pdftoppm renders it, tesseract reads it."""
    import io

    from PIL import Image

    from backend.demo.files import receipt_png

    out = io.BytesIO()
    Image.open(io.BytesIO(receipt_png())).convert("RGB").save(out, format="PDF", resolution=150)
    return out.getvalue()


@pytest.mark.skipif(
    shutil.which("tesseract") is None or shutil.which("pdftoppm") is None, reason="no OCR tools"
)
def test_pdftoppm_and_tesseract_still_work_inside_the_sandbox() -> None:
    from backend.demo.files import receipt_png

    assert convert_worker.bwrap_problem() is None
    for data, name in ((scanned_pdf(), "scan.pdf"), (receipt_png(), "receipt.png")):
        isolated, local = convert_isolated(data, name), convert(data, name)
        assert isolated.error is None, isolated.error
        assert isolated.text == local.text and len(isolated.text) > 20


@pytest.fixture
def no_bwrap(monkeypatch) -> Iterator[None]:
    """A host without bwrap: the program name points nowhere and the cached check is redone."""
    monkeypatch.setattr(convert_worker, "BWRAP", "/nonexistent/bwrap")
    convert_worker.bwrap_problem.cache_clear()
    yield
    convert_worker.bwrap_problem.cache_clear()


def test_without_bwrap_conversion_falls_back_with_the_drop_and_seccomp(no_bwrap, listener, targets) -> None:
    assert convert_worker.converter_fallback() == [
        "converters run without bubblewrap: /nonexistent/bwrap is not installed (Debian package bubblewrap)"
    ]
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert converted.error is None and converted.tables[0].rows == [["1", "2"]]
    result = run_confined(listener, targets)
    assert result["ns"] == own_namespaces()  # no sandbox this time
    assert result["uid"] != 0 and result["inet"] == "EPERM" and result["unshare"] == "EPERM"


X32_PROBE = """
import ctypes, sys
if sys.argv[1] == "confined":
    from backend.convert.worker import enter_confinement
    enter_confinement(1 << 30)
ctypes.CDLL(None).syscall(0x40000000 | 39)  # getpid through the x32 ABI, where the numbers mean other calls
print("survived")
"""


def test_a_call_through_another_syscall_abi_kills_the_converter() -> None:
    """The filter knows x86_64's numbers only; anything else fails closed instead of slipping past."""
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    try:
        process = spawn_confined([sys.executable, "-c", X32_PROBE, "confined"], workdir)
        out, _ = process.communicate(timeout=120)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert out == b"" and process.returncode == 128 + 31  # bwrap's report of SIGSYS


def test_positive_control_unconfined_the_same_call_returns() -> None:
    done = subprocess.run(
        [sys.executable, "-c", X32_PROBE, "plain"], capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "survived\n"


def test_a_service_installed_under_tmp_still_reaches_its_code_inside_the_sandbox(monkeypatch, tmp_path):
    """The sandbox's /tmp is empty, but a virtualenv or checkout that lives under /tmp (a CI clone) is bound
    on top of it: the converter must still find its interpreter and the `backend` package there. Control: a
    file beside that folder, in the host's /tmp, stays out of sight."""
    shared = Path(tempfile.mkdtemp(prefix="cleanroom-under-tmp-", dir="/tmp"))
    try:
        (shared / "code.txt").write_text("reachable")
        os.chmod(shared, 0o755)
        os.chmod(shared / "code.txt", 0o644)
        beside = Path("/tmp") / f"cleanroom-beside-{uuid.uuid4().hex}.txt"
        beside.write_text("host tmp")
        folders = convert_worker.readonly_folders()
        monkeypatch.setattr(convert_worker, "readonly_folders", lambda: [*folders, shared.resolve()])
        script = "import os, sys; print(open(sys.argv[1]).read(), os.path.exists(sys.argv[2]))"
        child = spawn_confined(
            [sys.executable, "-c", script, str(shared / "code.txt"), str(beside)], tmp_path
        )
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
        assert out.decode().split() == ["reachable", "False"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
        beside.unlink(missing_ok=True)
