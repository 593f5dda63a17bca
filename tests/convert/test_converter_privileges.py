"""Converters parse hostile files, so they do it as an unprivileged user with no groups, in an empty folder of
their own, under process, file-size, open-file and CPU-time ceilings.

The adversary is a "converter" that, once set up exactly as the real one (`spawn_confined`, then `preload`,
`drop_privileges`, `confine` as `isolated.main` does before it reads the file), tries to read a root-only
file, write beside it, become root again and start many processes. The positive control runs the same
probe without the drop and reaches the secret. The probe runs without bubblewrap (whose fresh /tmp would hide
the secret anyway): this file is about the user drop; tests/convert/test_converter_sandbox.py is about the
namespaces and the seccomp filter around it."""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import backend
from backend.convert import convert
from backend.convert import isolated as converter_child
from backend.convert.isolated import (
    MAX_FILE_BYTES,
    MAX_PROCESSES,
    convert_isolated,
    cpu_seconds,
    spawn_confined,
)
from backend.convert.model import ConvertLimits

pytestmark = pytest.mark.hardening

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs a root service")

PROBE = """
import json, os, sys
from backend.convert.isolated import confine, drop_privileges, preload
preload()
if sys.argv[2] == "drop":
    drop_privileges()
confine(1 << 30)
secret_dir = sys.argv[1]
result = {"uid": os.getuid(), "euid": os.geteuid(), "groups": os.getgroups(), "cwd": os.getcwd()}
def attempt(name, fn):
    try:
        result[name] = fn()
    except OSError as exc:
        result[name] = type(exc).__name__
attempt("read_secret", lambda: open(os.path.join(secret_dir, "secret"), encoding="utf-8").read())
attempt("write_outside", lambda: open(os.path.join(secret_dir, "planted"), "w").write("x"))
attempt("write_own_dir", lambda: open("scratch", "w").write("x"))
attempt("become_root", lambda: os.setuid(0))
def big_file():
    with open("big", "wb") as fh:
        return fh.write(b"\\0" * ((256 << 20) + 1))
attempt("big_file", big_file)
import resource
result["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
result["fsize"] = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
result["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
result["cpu"] = resource.getrlimit(resource.RLIMIT_CPU)
result["env"] = sorted(os.environ)
result["pythonpath"] = os.environ.get("PYTHONPATH")
print(json.dumps(result))
"""


@pytest.fixture
def secret_dir() -> Iterator[Path]:
    """A folder anyone may pass through holding a root-only 0600 file: only the file's mode protects it."""
    path = Path(tempfile.mkdtemp(prefix="cleanroom-secret-"))
    path.chmod(0o755)
    secret = path / "secret"
    secret.write_text("the company's payroll")
    secret.chmod(0o600)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _probe(secret_dir: Path, mode: str) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    try:
        process = spawn_confined([sys.executable, "-c", PROBE, str(secret_dir), mode], workdir, bwrap=False)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
        return json.loads(out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@needs_root
def test_a_hostile_converter_cannot_read_root_files_write_outside_or_regain_root(secret_dir: Path) -> None:
    result = _probe(secret_dir, "drop")
    uid, gid = converter_child.converter_identity()
    assert result["uid"] == result["euid"] == uid != 0
    assert result["groups"] == []
    assert result["read_secret"] == "PermissionError"
    assert result["write_outside"] == "PermissionError"
    assert not (secret_dir / "planted").exists()
    assert result["become_root"] == "PermissionError"
    assert result["write_own_dir"] == 1  # its own empty folder is where it may write
    assert result["cwd"].startswith(tempfile.gettempdir())
    assert result["big_file"] == "OSError"  # EFBIG past RLIMIT_FSIZE (Python ignores SIGXFSZ)
    assert (result["nproc"], result["fsize"]) == (MAX_PROCESSES, MAX_FILE_BYTES)
    assert result["nofile"] <= 256
    assert result["cpu"] == [cpu_seconds(), cpu_seconds() + 1]  # SIGXCPU, then SIGKILL were it caught
    assert cpu_seconds() > ConvertLimits().time_limit_seconds  # a little above the conversion time limit
    assert set(result["env"]) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "TESSDATA_PREFIX",
        "HOME",
        "TMPDIR",
        "PYTHONPATH",
    } | {
        "OMP_THREAD_LIMIT",
        "PYTHONDONTWRITEBYTECODE",
        "LC_CTYPE",  # Python may set it when coercing the C locale
    }
    # the one PYTHONPATH it gets names the code the parent runs (bound read-only), never the parent's own
    assert result["pythonpath"] == str(Path(backend.__file__).resolve().parent.parent)


@needs_root
def test_positive_control_the_same_probe_without_the_drop_reads_the_secret(secret_dir: Path) -> None:
    result = _probe(secret_dir, "keep")
    assert result["uid"] == 0
    assert result["read_secret"] == "the company's payroll"
    assert result["write_outside"] == 1


def test_the_converter_child_drops_before_it_reads_the_file(monkeypatch) -> None:
    """`main` loads its modules, drops and confines itself, and only then reads the untrusted bytes."""
    order: list[str] = []

    class Stdin:
        def __init__(self) -> None:
            header = {"filename": "a.csv", "limits": {}, "memory": 1 << 30}
            self.buffer = io.BytesIO(json.dumps(header).encode() + b"\n")
            self.buffer.read = lambda *a: order.append("read file") or b"a,b\n1,2\n"  # type: ignore[method-assign]

    class Stdout:
        buffer = io.BytesIO()

    monkeypatch.setattr(sys, "stdin", Stdin())
    monkeypatch.setattr(sys, "stdout", Stdout())
    for step in ("preload", "drop_privileges", "confine"):
        monkeypatch.setattr(converter_child, step, lambda *a, _s=step: order.append(_s))
    monkeypatch.setattr(
        "backend.convert.service.convert",
        lambda data, name, limits: order.append("convert") or convert(data, name),
    )
    converter_child.main()
    assert order == ["preload", "drop_privileges", "confine", "read file", "convert"]
    assert json.loads(Stdout.buffer.getvalue())["kind"] == "csv"


@pytest.mark.parametrize(
    "name", ["sales.csv", "Q3 pipeline review.xlsx", "Vendor price list.pdf", "receipt.png"]
)
def test_positive_control_real_files_still_convert_in_the_confined_child(name: str) -> None:
    from backend.demo.files import demo_drive_files

    files = {"sales.csv": "East;1200\nWest;900\n".encode("cp1252")}
    for demo_name, data in demo_drive_files():
        files.setdefault(demo_name, data)
    files["receipt.png"] = next(d for n, d in demo_drive_files() if n.endswith(".png"))
    data = files[name]
    isolated = convert_isolated(data, name)
    assert isolated.error is None, isolated.error
    in_process = convert(data, name)
    assert isolated.kind == in_process.kind
    assert [t.rows for t in isolated.tables] == [t.rows for t in in_process.tables]
    assert isolated.text == in_process.text


# A converter stuck computing (a parser loop on a hostile file): it spins until it has used 3 s of CPU.
SPIN = """
import sys, time
from backend.convert.isolated import confine
confine(1 << 30, int(sys.argv[1]) or None)
while time.process_time() < 3:
    pass
print("survived")
"""


def _spin(cpu: int) -> tuple[int, bytes]:
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-spin-"))
    try:
        process = spawn_confined([sys.executable, "-c", SPIN, str(cpu)], workdir, bwrap=False)
        out, _ = process.communicate(timeout=60)
        return process.returncode, out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_converter_computing_past_its_cpu_ceiling_is_stopped(monkeypatch) -> None:
    """RLIMIT_CPU ends it (SIGXCPU) long before the wall-clock kill, and the service words it as the time
    limit; every program it starts has the same ceiling of its own."""
    assert _spin(1) == (-signal.SIGXCPU, b"")
    real_spawn = converter_child.spawn_confined
    monkeypatch.setattr(
        converter_child,
        "spawn_confined",
        lambda argv, workdir, bwrap=True: real_spawn([sys.executable, "-c", SPIN, "1"], workdir, bwrap=False),
    )
    began = time.monotonic()
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert converted.error is not None and "longer than the 30 s limit" in converted.error
    assert time.monotonic() - began < 30  # the ceiling, not the 40 s wall-clock kill, ended it


def test_positive_control_without_the_cpu_ceiling_the_same_converter_spins_on() -> None:
    """The same child under the default ceiling (35 s of CPU) finishes its 3 s: the 1 s ceiling stopped it."""
    assert _spin(0) == (0, b"survived\n")


def test_the_parent_keeps_its_own_limits() -> None:
    """The ceilings are the child's: the service itself is not confined by converting a file."""
    before = [resource.getrlimit(limit) for limit in (resource.RLIMIT_NPROC, resource.RLIMIT_CPU)]
    convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert [resource.getrlimit(limit) for limit in (resource.RLIMIT_NPROC, resource.RLIMIT_CPU)] == before


def test_code_under_a_private_folder_is_noticed_so_a_converter_without_bwrap_refuses(
    tmp_path, monkeypatch
) -> None:
    """Without bubblewrap (the benchmark's mode) a checkout under /root (0700) cannot be read once the child has
    dropped: that layout is detected, and the converter is refused instead of running as root as it used to;
    a passable layout drops as usual. (Inside bubblewrap the folders above the code are the sandbox's own, so
    the service's conversions do not depend on this: tests/convert/test_converter_sandbox.py.)"""
    private = tmp_path / "home"
    code = private / "checkout" / "backend"
    code.mkdir(parents=True)
    private.chmod(0o700)
    assert converter_child.first_private_folder({code}) == str(private)
    if os.geteuid() == 0:
        monkeypatch.setattr(converter_child, "unreadable_code", lambda: str(private))
        with pytest.raises(converter_child.ConverterUnavailable, match="not passable by other users"):
            spawn_confined([sys.executable, "-c", "print('parsed')"], tmp_path, bwrap=False)
        converted = convert_isolated(b"a,b\n1,2\n", "t.csv", bwrap=False)
        assert converted.error is not None and converted.tables == []
        monkeypatch.undo()
    private.chmod(0o755)
    tmp_path.chmod(0o755)
    passable = converter_child.first_private_folder({code})
    assert passable is None or not Path(passable).is_relative_to(tmp_path)
