"""`convert_isolated()`: the same conversion in a child process with a hard wall-clock and memory ceiling.

The in-process deadline is cooperative: it is checked between rows, chunks and pages, so one
pathological PDF page (pdfplumber's table finder on a page with a million rules) can still run long.
The child runs in its own process group and is killed with everything it started (tesseract) when the
ceiling passes; its address space is capped with RLIMIT_AS and its CPU time (and that of
each program it starts) with RLIMIT_CPU a little above the time limit.

The parsers read hostile files, so they do not run as root: the child starts in a fresh empty directory
of its own (its cwd, HOME and TMPDIR) with a clean environment, loads its modules, then, before it reads a
byte of the file, becomes the unprivileged converter user for good (`cleanroom-convert`, made by
scripts/setup; `nobody` when it is missing) with no supplementary groups and no_new_privs, and caps its
processes, file sizes and open files, and installs a seccomp filter (`backend/convert/seccomp.py`: no network
sockets, no io_uring, no namespaces, no mounts, no ptrace). It reads the file from stdin and answers on
stdout, so it needs no access to the data directory at all. A service not running as root has nothing to drop.

Around all that, the child runs inside bubblewrap (`bwrap`): its own mount, network, IPC, PID and UTS
namespaces, a root filesystem that holds only what the converters read (/usr, the few /etc files they open,
the Python installation, the virtualenv, the `backend` package; all read-only), a fresh /tmp, and its scratch
folder as the one writable place. The data directory, /root, /home, /var (but its fontconfig cache) and the
rest of /etc (password hashes, keys, service configuration) are simply not there; the folders above what is
bound are the sandbox's own (0755), so a checkout under a private folder (/root is 0700) is still reachable
by the converter user inside.

Conversion never runs weaker than that: where bwrap is missing or cannot start, no unprivileged user exists,
or the converter user cannot load the parsers inside the sandbox (`sandbox_problem()`, checked once by
starting the real sandbox), every conversion is refused with that reason (the file is not staged; the
manifest says why) and `cleanroom health` reports it. Nothing is parsed unconfined or as root.

The child's stdout is read with a bound (`convert_max_output_bytes`): a converter that answers more is killed
and the file is not staged, so a hostile file cannot stream gigabytes into the service.

Protocol: stdin carries one JSON line {"filename", "limits"} followed by the file's bytes; stdout
carries the `Converted` as JSON.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import json
import logging
import math
import os
import pwd
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from backend.convert import seccomp
from backend.convert.model import Converted, ConvertLimits, Table
from backend.settings import get_settings

log = logging.getLogger("cleanroom.convert")

GRACE_SECONDS = 10.0  # interpreter start-up and serialisation on top of the conversion time limit
DEFAULT_MEMORY_BYTES = 2 * 1024**3
CONVERTER_USERS = ("cleanroom-convert", "nobody")  # the first that exists; scripts/setup makes the first
# RLIMIT_NPROC counts every process and thread of the converter user on the host, not of one conversion: a
# conversion peaks at 2 (the Python child and tesseract, OMP_THREAD_LIMIT=1; measured over the demo
# files), and staging converts on asyncio's thread pool (at most 32 at once per API process), so this leaves
# room for 512 conversions at once across all companies. It is the host's backstop against a fork bomb; the
# pid namespace bounds how long one lives (everything in it dies with the conversion).
MAX_PROCESSES = 1024
MAX_FILE_BYTES = 256 * 1024**2  # one scratch file (a rendered page is tens of MB)
MAX_OPEN_FILES = 256
CPU_MARGIN_SECONDS = 5  # RLIMIT_CPU: this much above the conversion time limit (the wall-clock kill stays)
READ_CHUNK_BYTES = 64 * 1024
STDERR_KEPT_BYTES = 64 * 1024  # the end of the child's stderr (what says MemoryError); the rest is dropped
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TESSDATA_PREFIX")
IDENTITY_ENV = "CLEANROOM_CONVERTER_IDS"  # "uid:gid" or "" (a service not running as root: nothing to drop)
BWRAP = "bwrap"  # the program; tests point it at a missing one to see conversion refused
# The only /etc entries inside the sandbox, each where the host has it (measured with strace over every kind
# of file): the loader's cache, the time zone, the MIME table the `mimetypes` module reads, fontconfig's
# configuration (pdftoppm substituting a font a PDF does not embed), the alternatives symlinks some libraries
# resolve through, and GnuTLS's configuration that tesseract's libraries look for. No passwd, shadow or keys.
ETC_KEPT = ("alternatives", "fonts", "gnutls", "ld.so.cache", "localtime", "mime.types")
# When the service is root there is no user namespace: bwrap hands its capabilities on unless told otherwise.
# The child keeps only what it needs until it drops to the converter user (which clears them all, checked by
# `sandbox_problem()`): changing ids, and passing its own scratch folder (0700, the converter user's).
KEPT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_DAC_READ_SEARCH")
# Standard-library modules the parsers import only when a file needs them (measured over tests/convert).
PRELOAD_ENCODINGS = (
    "utf_8_sig",
    "utf_16_le",
    "utf_16_be",
    "utf_32_le",
    "utf_32_be",
    "unicode_escape",
    "idna",
)
PRELOAD_MODULES = (
    "_markupbase",
    "_multibytecodec",
    "bz2",
    "csv",
    "ctypes",
    "decimal",
    "gzip",
    "html.parser",
    "http.client",
    "lzma",
    "mimetypes",
    "mmap",
    "unicodedata",
    "urllib.error",
    "urllib.request",
    "urllib.response",
    "xml.dom.expatbuilder",
    "xml.dom.minidom",
    "xml.etree.ElementTree",
    "xml.sax.expatreader",
    "xml.sax.saxutils",
    "zipfile",
    "zlib",
    # parser libraries that import from the standard library when they are first imported themselves
    "charset_normalizer",
    "defusedxml.ElementTree",  # re-imports xml.etree.ElementTree afresh
    "defusedxml.expatreader",
    "defusedxml.minidom",
    "mammoth",  # .docx (backend/convert/docx.py)
    "odf.opendocument",
    "PIL.Image",
)


# Third-party modules the parsers import only when a file needs them: the sandbox check imports them as the
# converter user, so a virtualenv that user cannot read is found before any file is converted.
CHECKED_MODULES = (
    "backend.convert.service",
    "charset_normalizer",
    "defusedxml.minidom",
    "mammoth",
    "odf.opendocument",
    "openpyxl.formula.translate",
    "openpyxl.styles.numbers",
    "openpyxl.utils.datetime",
    "pdfplumber",
    "PIL.Image",
    "PIL.ImageOps",
    "PIL.ImageSequence",
    "pypdf",
    "pypdfium2",  # renders the PDF pages OCR reads, in the child itself (a native library: loaded here first)
)
CHECK_ARG = "--check"


class ConverterUnavailable(RuntimeError):
    """Conversion is refused on this host: the converter cannot run fully confined (the message says why)."""


def converter_identity() -> tuple[int, int] | None:
    """(uid, gid) the converter runs as, or None when this process is not root (nothing to drop: bwrap's
    user namespace keeps it unprivileged). A root service without an unprivileged user raises."""
    if os.geteuid() != 0:
        return None
    for name in CONVERTER_USERS:
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            if entry.pw_uid != 0:
                return entry.pw_uid, entry.pw_gid
    raise ConverterUnavailable(
        f"no unprivileged user to run converters as (tried {', '.join(CONVERTER_USERS)}; scripts/setup makes "
        f"{CONVERTER_USERS[0]})"
    )


def unreadable_code() -> str | None:
    """Without bubblewrap (only backend/benches/convert.py and the drop's own tests): the first folder holding the converter's
    code (this checkout, the virtualenv's packages) that other users cannot pass on the host, or None. Inside
    bubblewrap the folders above what is bound are the sandbox's own, so there `sandbox_problem()` decides."""
    import backend

    folders = {Path(backend.__file__).resolve().parent}
    folders.update(Path(p).resolve() for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    return first_private_folder(folders)


def first_private_folder(folders: set[Path]) -> str | None:
    for folder in sorted(folders):
        for step in (folder, *folder.parents):
            if not step.stat().st_mode & stat.S_IXOTH:
                return str(step)
    return None


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why conversions are refused on this host, or None when they run fully confined. Checked once, for real:
    the converter's own sandbox is started, drops to the converter user, installs its filter and imports the
    parsers (`CHECKED_MODULES`). A problem is logged once; `cleanroom health` reports it."""
    try:
        identity = converter_identity()
        if shutil.which(BWRAP) is None:
            raise ConverterUnavailable(f"{BWRAP} is not installed (Debian package bubblewrap)")
        with tempfile.TemporaryDirectory(prefix="cleanroom-convert-check-") as folder:
            process = _spawn(
                [sys.executable, "-m", "backend.convert.isolated", CHECK_ARG, *CHECKED_MODULES],
                Path(folder),
                True,
            )
            try:
                out, err = process.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                process.communicate()
                raise ConverterUnavailable(f"the {BWRAP} sandbox did not start within 120 s") from None
        said = err.decode(errors="replace").strip().splitlines()
        if process.returncode != 0:
            last = said[-1] if said else f"exit {process.returncode}"
            hint = ""
            if identity is not None and any(
                e in last for e in ("ImportError", "NotFoundError", "PermissionError")
            ):
                hint = (
                    f"; the converter user (uid {identity[0]}) must be able to read the Python installation, the "
                    "virtualenv and the backend package (chmod -R o+rX, or install them where others can read)"
                )
            raise ConverterUnavailable(f"the converter could not start in its {BWRAP} sandbox ({last}){hint}")
        expected = {"uid": identity[0] if identity else os.getuid(), "seccomp": 2, "capabilities": 0}
        if json.loads(out) != expected:
            raise ConverterUnavailable(f"the converter's check answered {out[:200]!r}, not {expected}")
    except ConverterUnavailable as exc:
        log.error("file conversion is refused: %s", exc)
        return str(exc)
    return None


def converter_fallback() -> list[str]:
    """What `cleanroom health` reports about the converters: why conversion is refused on this host ([] when
    it runs fully confined). There is no weaker way to run them; the name is the health field's."""
    problem = sandbox_problem()
    return [] if problem is None else [f"file conversion refused: {problem}"]


def bwrap_argv(workdir: Path) -> list[str]:
    """bwrap's command line up to the program to run: the namespaces, and a new root holding read-only
    only what the converters need, then `workdir` (same path) as the one writable folder."""
    argv = [BWRAP, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-ipc", "--unshare-pid"]
    argv += ["--unshare-uts", "--unshare-cgroup-try", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):  # merged /usr: symlinks
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_KEPT:
        path = f"/etc/{name}"
        if os.path.islink(path):  # /etc/localtime names its zone through the link
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    # /tmp before the folders below: a checkout or virtualenv under /tmp is bound on top of the empty one
    argv += ["--tmpfs", "/tmp"]
    folders = readonly_folders()
    # their parents made first and passable: bwrap would make them 0700, closed to the converter user
    for parent in sorted({str(up) for folder in folders for up in folder.parents if up.parent != up}):
        argv += ["--perms", "0755", "--dir", parent]
    for folder in folders:
        argv += ["--ro-bind", str(folder), str(folder)]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--remount-ro", "/"]
    if os.geteuid() == 0:  # no user namespace: bwrap hands its capabilities on unless told otherwise
        argv += ["--cap-drop", "ALL", *(arg for cap in KEPT_CAPS for arg in ("--cap-add", cap))]
    else:  # an unprivileged service needs a user namespace for the others (where the host allows one)
        argv += ["--unshare-user"]
    return [*argv, "--"]


def readonly_folders() -> list[Path]:
    """What the converters read besides /usr and /etc, outermost folders only: the Python installation, the
    virtualenv, the `backend` package (not the checkout: its data directory var/ stays out), the fontconfig
    cache (spares pdftoppm a font scan) and TESSDATA_PREFIX when set."""
    import backend

    folders = {Path(backend.__file__).resolve().parent, Path(sys.executable).resolve().parent}
    folders.update(
        Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    )
    folders.update(Path(p).resolve() for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    extras = ("/var/cache/fontconfig", os.environ.get("TESSDATA_PREFIX", ""))
    folders.update(Path(p).resolve() for p in extras if p.startswith("/"))
    folders = {
        f for f in folders if f.is_dir() and not any(f.is_relative_to(top) for top in ("/usr", "/etc"))
    }
    return [f for f in sorted(folders) if not any(f != o and f.is_relative_to(o) for o in folders)]


def spawn_confined(argv: list[str], workdir: Path, *, bwrap: bool = True) -> subprocess.Popen:
    """Start `argv` for a conversion: the empty `workdir` (handed to the converter user) as cwd, HOME and
    TMPDIR, a clean environment, its own process group, stdin/stdout/stderr as pipes, inside bubblewrap.
    `bwrap=False` is for backend/benches/convert.py (what the sandbox costs) and the drop's own tests, never the service; it
    still drops, and refuses code the converter user could not read. ConverterUnavailable when the converter
    cannot run confined here (`sandbox_problem()`): nothing is started. The child drops to the converter user
    itself (`drop_privileges`) once its modules are loaded and before it reads the file: the interpreter may
    live where only root can read (pyenv under /root). The parent decides which user (the child sees a
    different file system) and says so in IDENTITY_ENV."""
    if bwrap:
        if (problem := sandbox_problem()) is not None:
            raise ConverterUnavailable(problem)
    elif converter_identity() is not None and (private := unreadable_code()) is not None:
        raise ConverterUnavailable(f"{private} is not passable by other users")
    return _spawn(argv, workdir, bwrap)


def _spawn(argv: list[str], workdir: Path, bwrap: bool) -> subprocess.Popen:
    identity = converter_identity()
    workdir.chmod(0o700)
    if identity is not None:
        os.chown(workdir, *identity)
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.update(HOME=str(workdir), TMPDIR=str(workdir), OMP_THREAD_LIMIT="1", PYTHONDONTWRITEBYTECODE="1")
    env[IDENTITY_ENV] = "" if identity is None else f"{identity[0]}:{identity[1]}"
    # the child imports the `backend` package the parent runs (bound read-only by `bwrap_argv`), not whichever
    # one the virtualenv's editable install names (another checkout, not bound: a worktree's child failed)
    import backend

    # that code's root, after a PYTHONPATH only KEPT_ENV could have kept (the service keeps none; a test does)
    root = str(Path(backend.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = ":".join(p for p in (env.get("PYTHONPATH", ""), root) if p)
    if bwrap:
        argv = [*bwrap_argv(workdir), *argv]
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
        env=env,
        umask=0o077,
        start_new_session=True,
        close_fds=True,
    )


def drop_privileges() -> None:
    """Become the converter user for good: no groups, real/effective/saved ids all changed, and no way back
    through a set-uid program (no_new_privs). Nothing to do when not root; a root child told not to drop
    refuses to go on (nothing is ever parsed as root)."""
    ids = os.environ.pop(IDENTITY_ENV, None)  # set by `spawn_confined`; not handed on to tesseract
    if ids is None:
        identity = converter_identity()
    else:
        identity = tuple(int(part) for part in ids.split(":")) if ids else None
    if identity is None and os.geteuid() == 0:
        raise RuntimeError("the converter has no unprivileged user to drop to and does not parse as root")
    if identity is not None:
        uid, gid = identity
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid, uid, uid) or os.getgroups():
            raise RuntimeError("the converter could not drop its privileges")
    _no_new_privs()


def _no_new_privs() -> None:
    pr_set_no_new_privs = 38
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def preload() -> None:
    """Import what the parsers load lazily from the standard library, while it is still readable."""
    import encodings.aliases
    import importlib

    for name in sorted({*encodings.aliases.aliases.values(), *PRELOAD_ENCODINGS}):
        with contextlib.suppress(ImportError, LookupError):
            importlib.import_module(f"encodings.{name}")
    for name in PRELOAD_MODULES:  # third-party modules stay importable: the virtualenv is world-readable
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def cpu_seconds(time_limit_seconds: float = ConvertLimits.time_limit_seconds) -> int:
    """The child's CPU-time ceiling: a little above the conversion time limit. The parent's wall-clock
    kill stays; this one also holds for each program the child starts (tesseract: every process
    gets its own) and for a child whose parent is gone."""
    return math.ceil(time_limit_seconds) + CPU_MARGIN_SECONDS


def enter_confinement(memory_bytes: int, cpu: int | None = None) -> None:
    """Everything the child does before it reads the file, in this order (adversary tests call it too)."""
    preload()
    drop_privileges()
    confine(memory_bytes, cpu)


def confine(memory_bytes: int, cpu: int | None = None) -> None:
    """Run in the child after the drop: ceilings it cannot raise again (it is not root), then the seccomp
    filter, which stays on for everything it starts. `cpu` seconds of CPU time (default `cpu_seconds()`):
    past it the kernel sends SIGXCPU, which ends the child (a second later SIGKILL, were it caught)."""
    cpu = cpu or cpu_seconds()
    for limit, soft, hard in (
        (resource.RLIMIT_AS, memory_bytes, memory_bytes),
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # soft == hard would be SIGKILL, read as "too much memory"
        (resource.RLIMIT_NPROC, MAX_PROCESSES, MAX_PROCESSES),
        (resource.RLIMIT_FSIZE, MAX_FILE_BYTES, MAX_FILE_BYTES),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES, MAX_OPEN_FILES),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(limit, (soft, hard))
    _no_new_privs()  # seccomp needs it when the child stayed root; a no-op after `drop_privileges`
    seccomp.install()


def convert_isolated(
    data: bytes,
    filename: str,
    *,
    limits: ConvertLimits | None = None,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    grace_seconds: float = GRACE_SECONDS,
    bwrap: bool = True,
    max_output_bytes: int | None = None,
) -> Converted:
    """`bwrap=False` is for backend/benches/convert.py, to measure what the sandbox costs; the service never passes it.
    `max_output_bytes` (default: setting `convert_max_output_bytes`) bounds what is read of the answer."""
    limits = limits or ConvertLimits.from_settings()
    cap = max_output_bytes or get_settings().convert_max_output_bytes
    header = json.dumps({"filename": filename, "limits": dataclasses.asdict(limits), "memory": memory_bytes})
    scratch = Path(tempfile.mkdtemp(prefix="cleanroom-convert-"))
    try:
        return _convert_in(scratch, header, data, limits, grace_seconds, bwrap, cap)
    except ConverterUnavailable as exc:
        return Converted(
            error=f"File conversion is turned off on this server ({exc}), so the file was not staged. "
            "The operator sees this in `cleanroom health`."
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _convert_in(
    scratch: Path,
    header: str,
    data: bytes,
    limits: ConvertLimits,
    grace_seconds: float,
    bwrap: bool,
    cap: int,
) -> Converted:
    process = spawn_confined([sys.executable, "-m", "backend.convert.isolated"], scratch, bwrap=bwrap)
    try:
        out, err = _exchange(
            process, header.encode() + b"\n" + data, limits.time_limit_seconds + grace_seconds, cap
        )
    except subprocess.TimeoutExpired:
        return _too_long(limits)
    except OutputTooLarge:
        return Converted(
            error=f"The converted file is larger than the {cap / 1024**2:g} MB this server accepts from its "
            "converter, so it was not staged."
        )
    finally:
        if process.poll() is None:
            _kill_group(process)
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
    returncode = process.returncode
    if returncode > 128 and process.args[0] == BWRAP:  # bwrap reports a child killed by signal N as 128+N
        returncode = 128 - returncode
    if returncode != 0 or not out:
        if returncode == -signal.SIGXCPU:  # RLIMIT_CPU: it computed past its time limit
            return _too_long(limits)
        if returncode in (-signal.SIGKILL, -signal.SIGSEGV) or b"MemoryError" in err:
            return Converted(error="The file needs too much memory to convert and was not staged.")
        return Converted(
            error=f"The converter stopped unexpectedly (exit {returncode}); the file was not staged."
        )
    return from_json(out)


class OutputTooLarge(Exception):
    """The converter answered more than the bound; it has been killed."""


def _exchange(process: subprocess.Popen, payload: bytes, timeout: float, cap: int) -> tuple[bytes, bytes]:
    """`communicate()` with a bound: write `payload` to the child's stdin while reading its stdout (at most
    `cap` bytes) and stderr (its last STDERR_KEPT_BYTES), until it has closed both and exited. Past `cap` the
    child is killed with everything it started and OutputTooLarge raised; past `timeout` seconds likewise, with
    subprocess.TimeoutExpired."""
    assert process.stdin and process.stdout and process.stderr
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    view, offset = memoryview(payload), 0
    with selectors.DefaultSelector() as selector:
        os.set_blocking(process.stdin.fileno(), False)
        selector.register(process.stdin, selectors.EVENT_WRITE)
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_group(process)
                raise subprocess.TimeoutExpired(process.args, timeout)
            for key, _ in selector.select(remaining):
                if key.fileobj is process.stdin:
                    try:
                        offset += os.write(key.fd, view[offset : offset + READ_CHUNK_BYTES])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # it stopped reading: what it says decides
                        offset = len(view)
                    if offset >= len(view):
                        selector.unregister(process.stdin)
                        process.stdin.close()
                    continue
                chunk = os.read(key.fd, READ_CHUNK_BYTES)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is process.stdout:
                    out += chunk
                    if len(out) > cap:
                        _kill_group(process)
                        raise OutputTooLarge
                else:
                    err += chunk
                    del err[:-STDERR_KEPT_BYTES]
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise
    return bytes(out), bytes(err)


def _too_long(limits: ConvertLimits) -> Converted:
    return Converted(
        error=f"Conversion took longer than the {limits.time_limit_seconds:g} s limit, so the file was not staged."
    )


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def to_json(converted: Converted) -> bytes:
    return json.dumps(dataclasses.asdict(converted), ensure_ascii=False).encode("utf-8")


def from_json(raw: bytes) -> Converted:
    fields = json.loads(raw)
    fields["tables"] = [Table(**table) for table in fields.get("tables", [])]
    return Converted(**fields)


def check(modules: list[str]) -> None:
    """`sandbox_problem()`'s probe, inside the real sandbox: confine as for a file, then import every parser
    (`modules`: the parent's CHECKED_MODULES) as the converter user, and say who it is, that its filter is on
    and that it holds no capability."""
    import importlib

    enter_confinement(DEFAULT_MEMORY_BYTES)
    for name in modules:
        importlib.import_module(name)
    with open("/proc/self/status") as fh:
        status = dict(line.split(":", 1) for line in fh)
    said = {"uid": os.getuid(), "seccomp": int(status["Seccomp"]), "capabilities": int(status["CapEff"], 16)}
    print(json.dumps(said))


def main() -> None:
    from backend.convert.service import convert

    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())  # the service's own line; the file's bytes follow it
    limits = ConvertLimits(**header["limits"])
    enter_confinement(
        int(header.get("memory") or DEFAULT_MEMORY_BYTES), cpu_seconds(limits.time_limit_seconds)
    )
    data = stdin.read()
    converted = convert(data, header["filename"], limits=limits)
    sys.stdout.buffer.write(to_json(converted))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == [CHECK_ARG]:
        check(sys.argv[2:])
    else:
        main()
