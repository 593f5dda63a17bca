"""The converter child runs inside bubblewrap and under a seccomp filter, so a hostile file that gets code
running in a parser still cannot reach the network, write outside its scratch folder, read the password
hashes, or reach for io_uring and new namespaces.

The adversary is a probe that sets itself up exactly as `isolated.main` does (`spawn_confined`, then
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
from backend.convert import isolated as converter_child
from backend.convert.isolated import convert_isolated, spawn_confined
from backend.settings import get_settings

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="the converter sandbox needs a root service and bwrap (Debian package bubblewrap)",
)

HANDLE_AND_MEMORY_CALLS = r"""
# the "shocker" pair: a handle for a path, then any inode of that filesystem opened by a (guessed) handle
handle = ctypes.create_string_buffer(8 + 128)  # struct file_handle {u32 handle_bytes; int type; ...}
ctypes.memmove(handle, (128).to_bytes(4, "little"), 4)
mount_id = ctypes.c_int()
attempt("name_to_handle_at", lambda: syscall(303, -100, b".", handle, ctypes.byref(mount_id), 0))
def open_by_handle():
    fd = libc.syscall(304, os.open(".", os.O_RDONLY), handle, os.O_RDONLY)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    os.close(fd)
    return "done"
attempt("open_by_handle_at", open_by_handle)
class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
source, copy = ctypes.create_string_buffer(b"memory", 6), ctypes.create_string_buffer(6)
local = Iovec(ctypes.cast(copy, ctypes.c_void_p), 6)
remote = Iovec(ctypes.cast(source, ctypes.c_void_p), 6)
attempt("process_vm_readv", lambda: syscall(310, os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
attempt("process_vm_writev", lambda: syscall(311, os.getpid(), ctypes.byref(remote), 1, ctypes.byref(local), 1, 0))
"""

PROBE = (
    r"""
import ctypes, errno, json, os, socket, subprocess, sys
mode, port, targets = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
if mode == "confined":
    from backend.convert.isolated import enter_confinement
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
    # syscall(2) is variadic and reads longs: a Python int goes as a 4-byte int, and a 7th argument (on the
    # stack) then carries whatever the upper 4 bytes held (process_vm_readv's flags: EINVAL now and then)
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(ctypes.c_long(nr), *args) < 0:
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
"""
    + HANDLE_AND_MEMORY_CALLS
    + r"""attempt("etc", lambda: sorted(os.listdir("/etc")))
# last: in the plain run it succeeds, and the probe has no capability on the host after it
attempt("unshare", lambda: syscall(272, 0x10000000))  # unshare(CLONE_NEWUSER)
def child_seccomp():  # what a program the converter starts (like pdftoppm) is under
    grep = subprocess.run(["grep", "Seccomp:", "/proc/self/status"], capture_output=True, text=True)
    return grep.stdout.split()
attempt("child_seccomp", child_seccomp)
print(json.dumps(result))
"""
)


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
    assert result["uid"] == converter_child.converter_identity()[0] != 0
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
    """Only the few /etc files the parsers open are there: no shadow, passwd, ssh or ssl keys at all."""
    result = run_confined(listener, targets)
    assert result["shadow"] == "ENOENT"
    assert set(result["etc"]) <= set(converter_child.ETC_KEPT), result["etc"]
    assert "ld.so.cache" in result["etc"] and "passwd" not in result["etc"]


def test_positive_control_the_same_probe_unconfined_reads_the_hashes(listener, targets) -> None:
    result = run_plain(listener, targets)
    assert result["shadow"] == "root"
    assert {"passwd", "shadow", *converter_child.ETC_KEPT} & set(result["etc"]) >= {"passwd", "shadow"}


def test_a_hostile_converter_cannot_open_inodes_by_handle_or_touch_process_memory(listener, targets) -> None:
    """name_to_handle_at/open_by_handle_at (any inode of a bound filesystem by a guessed handle) and
    process_vm_readv/writev are refused by the filter, whoever the converter runs as."""
    result = run_confined(listener, targets)
    for call in ("name_to_handle_at", "open_by_handle_at", "process_vm_readv", "process_vm_writev"):
        assert result[call] == "EPERM", (call, result[call])


def test_positive_control_unconfined_the_same_handles_and_memory_calls_work(listener, targets) -> None:
    result = run_plain(listener, targets)
    for call in ("name_to_handle_at", "open_by_handle_at", "process_vm_readv", "process_vm_writev"):
        assert result[call] == "done", (call, result[call])


FILTER_PROBE = (
    r"""
import ctypes, errno, json, os, sys
if sys.argv[1] == "filtered":
    from backend.convert import seccomp
    from backend.convert.isolated import _no_new_privs
    _no_new_privs()
    seccomp.install()
libc = ctypes.CDLL(None, use_errno=True)
result = {}
def attempt(name, fn):
    try:
        result[name] = fn()
    except OSError as exc:
        result[name] = errno.errorcode.get(exc.errno, type(exc).__name__)
def syscall(nr, *args):
    # syscall(2) is variadic and reads longs: a Python int goes as a 4-byte int, and a 7th argument (on the
    # stack) then carries whatever the upper 4 bytes held (process_vm_readv's flags: EINVAL now and then)
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(ctypes.c_long(nr), *args) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return "done"
"""
    + HANDLE_AND_MEMORY_CALLS
    + """print(json.dumps(result))
"""
)


@pytest.mark.parametrize("mode", ["filtered", "plain"])
def test_the_filter_itself_denies_handles_and_process_memory_even_to_root(mode: str) -> None:
    """The filter alone, on a root process that keeps CAP_DAC_READ_SEARCH (what open_by_handle_at needs): the
    four calls fail with EPERM. The positive control is the same root process without the filter."""
    done = subprocess.run(
        [sys.executable, "-c", FILTER_PROBE, mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tempfile.mkdtemp(prefix="cleanroom-probe-filter-"),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    expected = "EPERM" if mode == "filtered" else "done"
    assert result == dict.fromkeys(
        ("name_to_handle_at", "open_by_handle_at", "process_vm_readv", "process_vm_writev"), expected
    )


def test_a_root_child_told_not_to_drop_refuses_to_parse(monkeypatch) -> None:
    """Where the old code kept a root child for a checkout only root could read, the child now stops before
    it reads a byte: nothing is parsed as root, and the conversion fails instead."""
    monkeypatch.setattr(converter_child, "converter_identity", lambda: None)  # the parent says "stay"
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    try:
        process = spawn_confined([sys.executable, "-m", "backend.convert.isolated"], workdir)
        out, err = process.communicate(b'{"filename": "t.csv", "limits": {}}\na,b\n1,2\n', timeout=120)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert process.returncode != 0 and out == b""
    assert b"does not parse as root" in err
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert converted.error is not None and converted.tables == []


def test_positive_control_a_child_told_its_user_drops_and_parses() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    try:
        process = spawn_confined([sys.executable, "-m", "backend.convert.isolated"], workdir)
        header = json.dumps({"filename": "t.csv", "limits": {}}).encode()
        out, err = process.communicate(header + b"\na,b\n1,2\n", timeout=120)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert process.returncode == 0, err.decode()
    assert json.loads(out)["tables"][0]["rows"] == [["1", "2"]]


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
    """A one-page PDF that is only an image: pdfium renders it in the converter child, tesseract reads it."""
    import io

    from PIL import Image

    from backend.demo.files import receipt_png

    out = io.BytesIO()
    Image.open(io.BytesIO(receipt_png())).convert("RGB").save(out, format="PDF", resolution=150)
    return out.getvalue()


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="no OCR (Debian package tesseract-ocr)")
def test_pdf_rendering_and_tesseract_still_work_inside_the_sandbox() -> None:
    from backend.demo.files import receipt_png

    assert converter_child.sandbox_problem() is None
    for data, name in ((scanned_pdf(), "scan.pdf"), (receipt_png(), "receipt.png")):
        isolated, local = convert_isolated(data, name), convert(data, name)
        assert isolated.error is None, isolated.error
        assert isolated.text == local.text and len(isolated.text) > 20


RENDER_PROBE = r"""
import json, os, sys, tempfile
from backend.convert.isolated import enter_confinement
from backend.convert.model import ConvertLimits
from backend.convert.pdf import _PageImages
memory, pixels = int(sys.argv[1]), int(sys.argv[2])
data = sys.stdin.buffer.read()
enter_confinement(memory)
with open("/proc/self/status") as fh:
    seccomp = [line.split()[1] for line in fh if line.startswith("Seccomp:")][0]
pages = _PageImages(data, ConvertLimits(max_image_pixels=pixels))
try:
    reduced = pages.render(1, "page.png")
    said = {"rendered": os.path.getsize("page.png") > 0, "reduced": reduced}
except BaseException as exc:
    said = {"error": type(exc).__name__}
print(json.dumps({**said, "uid": os.getuid(), "seccomp": seccomp}))
"""


def big_blank_pdf() -> bytes:
    """One page of 100 x 100 inches: 400 million pixels at the OCR resolution of 200 dpi."""
    import io

    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=7200, height=7200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def render_confined(data: bytes, memory: int, pixels: int) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
    try:
        child = spawn_confined([sys.executable, "-c", RENDER_PROBE, str(memory), str(pixels)], workdir)
        out, err = child.communicate(data, timeout=120)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert child.returncode == 0, err.decode()[-2000:]
    return json.loads(out)


def test_pdfium_renders_in_the_confined_child_within_the_pixel_limit() -> None:
    """The page renders inside bubblewrap, as the converter user, under the seccomp filter (mode 2) and a
    512 MiB address-space cap: it is scaled down to the 50-million-pixel limit (50 MB of grayscale)."""
    said = render_confined(big_blank_pdf(), 512 * 1024**2, 50_000_000)
    assert said == {"rendered": True, "reduced": True, "uid": said["uid"], "seccomp": "2"}
    assert said["uid"] != 0


def test_rlimit_as_still_bounds_pdfium_in_the_child() -> None:
    """The address-space cap binds the in-process renderer as it bound pdftoppm: with the pixel limit lifted,
    the page (400 MB of grayscale) does not fit in 384 MiB, and pdfium fails to make its bitmap (an error the
    converter reports as a warning) while the child itself lives on."""
    said = render_confined(big_blank_pdf(), 384 * 1024**2, 10**9)
    assert said.get("error") in ("PdfiumError", "MemoryError"), said
    assert said["seccomp"] == "2"


def test_positive_control_with_room_the_same_page_renders_at_full_size() -> None:
    """Control for the test above: the same child and limits but the converter's default 2 GiB cap."""
    said = render_confined(big_blank_pdf(), converter_child.DEFAULT_MEMORY_BYTES, 10**9)
    assert said == {"rendered": True, "reduced": False, "uid": said["uid"], "seccomp": "2"}


@pytest.fixture
def spawned(monkeypatch) -> list[list[str]]:
    """Every converter child started from here on (its command line), started for real."""
    started: list[list[str]] = []
    real = converter_child._spawn

    def recording(argv: list[str], workdir: Path, bwrap: bool):
        process = real(argv, workdir, bwrap)
        started.append(list(process.args))
        return process

    monkeypatch.setattr(converter_child, "_spawn", recording)
    converter_child.sandbox_problem.cache_clear()
    yield started
    converter_child.sandbox_problem.cache_clear()


def refused(converted, reason: str) -> bool:
    return (
        converted.error is not None
        and converted.error.startswith("File conversion is turned off on this server")
        and reason in converted.error
        and converted.tables == []
        and converted.text is None
    )


def test_without_bwrap_conversion_is_refused_and_nothing_is_parsed(spawned, monkeypatch) -> None:
    """A host without bwrap: the program name points nowhere. The old code ran the parser without namespaces;
    now no child is started at all, the file is not staged, and `cleanroom health` says why."""
    monkeypatch.setattr(converter_child, "BWRAP", "/nonexistent/bwrap")
    reason = "/nonexistent/bwrap is not installed (Debian package bubblewrap)"
    assert converter_child.converter_fallback() == [f"file conversion refused: {reason}"]
    assert refused(convert_isolated(b"a,b\n1,2\n", "t.csv"), reason)
    assert spawned == []
    with pytest.raises(converter_child.ConverterUnavailable):
        spawn_confined([sys.executable, "-c", "print('parsed')"], Path(tempfile.gettempdir()))
    assert spawned == []


def test_a_bwrap_that_cannot_start_refuses_conversion(spawned, monkeypatch) -> None:
    """bwrap is there but fails (no namespaces allowed, say): only the check's child ran, never a parser."""
    monkeypatch.setattr(converter_child, "BWRAP", shutil.which("false"))
    assert refused(convert_isolated(b"a,b\n1,2\n", "t.csv"), "could not start in its")
    assert len(spawned) == 1 and converter_child.CHECK_ARG in spawned[0]


def test_positive_control_with_bwrap_the_same_file_converts_inside_it(spawned) -> None:
    assert converter_child.converter_fallback() == []
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert converted.error is None and converted.tables[0].rows == [["1", "2"]]
    assert [argv[0] for argv in spawned] == ["bwrap", "bwrap"]  # the check, then the conversion
    assert spawned[-1][-3:] == [sys.executable, "-m", "backend.convert.isolated"]


def private_parser(tmp_path: Path, monkeypatch, *, readable: bool) -> None:
    """A parser module in a folder bound into the sandbox and on the child's path, readable by its owner (root)
    only or by everyone; the sandbox check imports it as the converter user."""
    folder = tmp_path / "parsers"
    folder.mkdir()
    (folder / "cleanroom_private_parser.py").write_text("READY = True\n")
    folder.chmod(0o755 if readable else 0o700)
    (folder / "cleanroom_private_parser.py").chmod(0o644 if readable else 0o600)
    folders = converter_child.readonly_folders()
    monkeypatch.setattr(converter_child, "readonly_folders", lambda: [*folders, folder])
    monkeypatch.setattr(converter_child, "KEPT_ENV", (*converter_child.KEPT_ENV, "PYTHONPATH"))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    checked = (*converter_child.CHECKED_MODULES, "cleanroom_private_parser")
    monkeypatch.setattr(converter_child, "CHECKED_MODULES", checked)


def test_code_the_converter_user_cannot_read_refuses_conversion(spawned, tmp_path, monkeypatch) -> None:
    """A checkout other users cannot read: the old code converted as root; now conversion is refused."""
    private_parser(tmp_path, monkeypatch, readable=False)
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert refused(converted, "No module named 'cleanroom_private_parser'"), converted.error
    assert "must be able to read" in converted.error
    assert len(spawned) == 1  # the check only


def test_positive_control_the_same_code_readable_by_others_converts(spawned, tmp_path, monkeypatch) -> None:
    private_parser(tmp_path, monkeypatch, readable=True)
    converted = convert_isolated(b"a,b\n1,2\n", "t.csv")
    assert converted.error is None and converted.tables[0].rows == [["1", "2"]]


def test_a_checkout_under_a_private_folder_is_reachable_inside_the_sandbox(tmp_path, monkeypatch) -> None:
    """Why no root fallback is needed for a checkout under /root (0700): inside the sandbox the folders above
    what is bound are bwrap's own (0755), so the converter user reads a passable folder under a private one.
    Control: on the host, the same user cannot even reach it."""
    home = tmp_path / "home"
    code = home / "checkout"
    code.mkdir(parents=True)
    (code / "module.py").write_text("reachable")
    code.chmod(0o755)
    home.chmod(0o700)
    folders = converter_child.readonly_folders()
    monkeypatch.setattr(converter_child, "readonly_folders", lambda: [*folders, code])
    script = (
        "import sys; from backend.convert.isolated import enter_confinement; enter_confinement(1 << 30)\n"
        "try:\n    print(open(sys.argv[1]).read())\nexcept OSError as exc:\n    print(type(exc).__name__)"
    )
    answers = []
    for bwrap in (True, False):
        workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
        try:
            child = spawn_confined(
                [sys.executable, "-c", script, str(code / "module.py")], workdir, bwrap=bwrap
            )
            out, err = child.communicate(timeout=120)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        assert child.returncode == 0, err.decode()
        answers.append(out.decode().strip())
    assert answers == ["reachable", "PermissionError"]


@pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="no pdftoppm")
def test_pdftoppm_finds_its_fonts_with_only_the_kept_etc_files(monkeypatch) -> None:
    """A PDF that does not embed its font: pdftoppm asks fontconfig (/etc/fonts) for a substitute. Control:
    without /etc/fonts in the sandbox the same render complains that fontconfig has no configuration."""
    from backend.demo.files import demo_drive_files

    pdf = next(data for name, data in demo_drive_files() if name.endswith(".pdf"))
    script = (
        "import os, subprocess, sys; from backend.convert.isolated import enter_confinement\n"
        "enter_confinement(1 << 30); open('in.pdf', 'wb').write(sys.stdin.buffer.read())\n"
        "done = subprocess.run(['pdftoppm', '-r', '50', '-png', 'in.pdf', 'page'], capture_output=True)\n"
        "print(done.returncode, os.path.exists('page-1.png'), done.stderr.decode()[:200])"
    )

    def render() -> str:
        workdir = Path(tempfile.mkdtemp(prefix="cleanroom-probe-"))
        try:
            child = spawn_confined([sys.executable, "-c", script], workdir)
            out, err = child.communicate(pdf, timeout=120)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        assert child.returncode == 0, err.decode()
        return out.decode().strip()

    assert render() == "0 True"
    kept = tuple(name for name in converter_child.ETC_KEPT if name != "fonts")
    monkeypatch.setattr(converter_child, "ETC_KEPT", kept)
    assert "Fontconfig error" in render()


@pytest.mark.parametrize("kind", ["ods", "json", "text", "markdown"])
def test_positive_control_the_other_kinds_convert_inside_the_sandbox(kind: str) -> None:
    """The demo files cover csv, xlsx, pdf and images (tests/convert/test_converter_privileges.py); these
    are the remaining kinds, each converted in the sandbox exactly as in this process."""
    from backend.demo.files import conversion_samples

    samples = conversion_samples()
    name, data = (
        samples.get(kind)
        or {
            "json": ("t.json", '{"a": [1, 2], "b": "été"}'.encode()),
            "text": ("notes.txt", "café au lait\n".encode("cp1252")),
            "markdown": ("readme.md", b"# Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"),
        }[kind]
    )
    isolated, local = convert_isolated(data, name), convert(data, name)
    assert isolated.error is None, isolated.error
    assert isolated.kind == local.kind == kind
    assert [t.rows for t in isolated.tables] == [t.rows for t in local.tables]
    assert isolated.text == local.text


X32_PROBE = """
import ctypes, sys
if sys.argv[1] == "confined":
    from backend.convert.isolated import enter_confinement
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
        folders = converter_child.readonly_folders()
        monkeypatch.setattr(converter_child, "readonly_folders", lambda: [*folders, shared.resolve()])
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


@pytest.mark.parametrize("bwrap", ["/nonexistent/bwrap", "bwrap"])
def test_cleanroom_health_says_when_conversion_is_refused(bwrap: str, spawned, monkeypatch) -> None:
    """The operator's view: a refused converter is a problem (exit 1, with the reason); a confined one is
    not. The health data is the real `converter_fallback()`; only the database part is left out."""
    from typer.testing import CliRunner

    from backend.cli import app
    from backend.cli import health as health_cli

    monkeypatch.setattr(converter_child, "BWRAP", bwrap)
    monkeypatch.setattr(
        health_cli,
        "run_db",
        lambda _fn: {"virt_type": "kvm", "converter_fallback": converter_child.converter_fallback()},
    )
    done = CliRunner().invoke(app, ["health"])
    if bwrap == "bwrap":
        assert done.exit_code == 0, done.output
        assert "converters          confined" in done.output
    else:
        assert done.exit_code == 1
        assert "file conversion refused: /nonexistent/bwrap is not installed" in done.output
