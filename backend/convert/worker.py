"""`convert_isolated()`: the same conversion in a child process with a hard wall-clock and memory ceiling.

The in-process deadline is cooperative: it is checked between rows, chunks and pages, so one
pathological PDF page (pdfplumber's table finder on a page with a million rules) can still run long.
The child runs in its own process group and is killed with everything it started (tesseract,
pdftoppm) when the ceiling passes; its address space is capped with RLIMIT_AS and its CPU time (and that of
each program it starts) with RLIMIT_CPU a little above the time limit.

The parsers read hostile files, so they do not run as root: the child starts in a fresh empty directory
of its own (its cwd, HOME and TMPDIR) with a clean environment, loads its modules, then, before it reads a
byte of the file, becomes the unprivileged converter user for good (`cleanroom-convert`, made by
scripts/setup; `nobody` when it is missing) with no supplementary groups and no_new_privs, and caps its
processes, file sizes and open files, and installs a seccomp filter (`backend/convert/seccomp.py`: no network
sockets, no io_uring, no namespaces, no mounts, no ptrace). It reads the file from stdin and answers on
stdout, so it needs no access to the data directory at all. A service not running as root has nothing to drop.

Around all that, the child runs inside bubblewrap (`bwrap`): its own mount, network, IPC, PID and UTS
namespaces, a root filesystem that holds only what the converters read (/usr, /etc without the password
hashes and private keys, the Python installation, the virtualenv, the `backend` package; all read-only), a
fresh /tmp, and its scratch folder as the one writable place. The data directory, /root, /home and /var
(but its fontconfig cache) are simply not there. Where bwrap is missing or cannot start (no namespaces
allowed) the child runs as before, said once in the log and by `cleanroom health` (`converter_fallback()`).

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
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from backend.convert import seccomp
from backend.convert.model import Converted, ConvertLimits, Table

log = logging.getLogger("cleanroom.convert")

GRACE_SECONDS = 10.0  # interpreter start-up and serialisation on top of the conversion time limit
DEFAULT_MEMORY_BYTES = 2 * 1024**3
CONVERTER_USERS = ("cleanroom-convert", "nobody")  # the first that exists; scripts/setup makes the first
MAX_PROCESSES = 64  # per uid: the child, pdftoppm or tesseract, and their threads
MAX_FILE_BYTES = 256 * 1024**2  # one scratch file (a rendered page is tens of MB)
MAX_OPEN_FILES = 256
CPU_MARGIN_SECONDS = 5  # RLIMIT_CPU: this much above the conversion time limit (the wall-clock kill stays)
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TESSDATA_PREFIX")
IDENTITY_ENV = "CLEANROOM_CONVERTER_IDS"  # "uid:gid" or "" (stay): the parent's decision for the child
BWRAP = "bwrap"  # the program; tests point it at a missing one to see the fallback
# Inside the sandbox these files are /dev/null on a nodev mount (no one can open them) and these folders are
# empty: a child still running as root (the `unreadable_code()` fallback) reads no hashes or private keys.
MASKED_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
MASKED_FOLDERS = ("/etc/ssl/private", "/etc/ssh")
# Kept capabilities when the service is root: enough to drop to the converter user (or, as root, to read a
# checkout in a private folder); not enough to remount, load modules or trace.
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
    "odf.opendocument",
    "PIL.Image",
)


def converter_identity() -> tuple[int, int] | None:
    """(uid, gid) the converter runs as, or None when this process is not root (nothing to drop) or when
    the converter user could not load its code (`unreadable_code()`: the run goes on as root, logged)."""
    if os.geteuid() != 0 or unreadable_code() is not None:
        return None
    for name in CONVERTER_USERS:
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            if entry.pw_uid != 0:
                return entry.pw_uid, entry.pw_gid
    raise RuntimeError(f"no unprivileged user to run converters as (tried {', '.join(CONVERTER_USERS)})")


@functools.lru_cache(maxsize=1)
def unreadable_code() -> str | None:
    """The first folder holding the converter's code (this checkout, the virtualenv's packages) that other
    users cannot pass, or None. A checkout under a private home folder (/root is 0700) cannot be read
    after the drop; converting as root then is the fallback, said once in the log and by `cleanroom health`."""
    import backend

    folders = {Path(backend.__file__).resolve().parent}
    folders.update(Path(p).resolve() for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    private = first_private_folder(folders)
    if private is not None:
        log.warning(
            "file converters run as root: %s is not passable by other users; move the checkout and its "
            "virtualenv to a folder others can pass to run them unprivileged",
            private,
        )
    return private


def first_private_folder(folders: set[Path]) -> str | None:
    for folder in sorted(folders):
        for step in (folder, *folder.parents):
            if not step.stat().st_mode & stat.S_IXOTH:
                return str(step)
    return None


@functools.lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """Why conversions cannot run inside bubblewrap on this host, or None when they can. Tried once with the
    real arguments; a problem is logged once, and the conversions then run without it."""
    problem = None
    if shutil.which(BWRAP) is None:
        problem = f"{BWRAP} is not installed (Debian package bubblewrap)"
    else:
        with tempfile.TemporaryDirectory(prefix="cleanroom-bwrap-check-") as folder:
            done = subprocess.run([*bwrap_argv(Path(folder)), "true"], capture_output=True, timeout=60)
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            problem = f"{BWRAP} could not start ({said[-1] if said else f'exit {done.returncode}'})"
    if problem is not None:
        log.warning("file converters run without their bubblewrap sandbox: %s", problem)
    return problem


def converter_fallback() -> list[str]:
    """What `cleanroom health` reports about the converters: each way they run weaker than designed."""
    fallbacks = []
    if os.geteuid() == 0 and (private := unreadable_code()) is not None:
        fallbacks.append(f"converters run as root: {private} is not passable by other users")
    if (problem := bwrap_problem()) is not None:
        fallbacks.append(f"converters run without bubblewrap: {problem}")
    return fallbacks


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
    argv += ["--ro-bind", "/etc", "/etc"]
    argv += [arg for path in MASKED_FILES if os.path.exists(path) for arg in ("--ro-bind", "/dev/null", path)]
    argv += [arg for path in MASKED_FOLDERS if os.path.isdir(path) for arg in ("--tmpfs", path)]
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
    TMPDIR, a clean environment, its own process group, stdin/stdout/stderr as pipes, inside bubblewrap
    unless `bwrap` is False (only `bench.py` measures that) or bwrap cannot run here. The child drops to
    the converter user itself (`drop_privileges`) once its modules are loaded and before it reads the
    file: the interpreter may live where only root can read (pyenv under /root). The parent decides which
    user (the child sees a different file system) and says so in IDENTITY_ENV."""
    identity = converter_identity()
    workdir.chmod(0o700)
    if identity is not None:
        os.chown(workdir, *identity)
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.update(HOME=str(workdir), TMPDIR=str(workdir), OMP_THREAD_LIMIT="1", PYTHONDONTWRITEBYTECODE="1")
    env[IDENTITY_ENV] = "" if identity is None else f"{identity[0]}:{identity[1]}"
    if bwrap and bwrap_problem() is None:
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
    through a set-uid program (no_new_privs). Nothing to do when not root."""
    ids = os.environ.pop(IDENTITY_ENV, None)  # set by `spawn_confined`; not handed on to pdftoppm/tesseract
    if ids is None:
        identity = converter_identity()
    else:
        identity = tuple(int(part) for part in ids.split(":")) if ids else None
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
    kill stays; this one also holds for each program the child starts (pdftoppm, tesseract: every process
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
) -> Converted:
    """`bwrap=False` is for `bench.py`, to measure what the sandbox costs; the service never passes it."""
    limits = limits or ConvertLimits.from_settings()
    header = json.dumps({"filename": filename, "limits": dataclasses.asdict(limits), "memory": memory_bytes})
    scratch = Path(tempfile.mkdtemp(prefix="cleanroom-convert-"))
    try:
        return _convert_in(scratch, header, data, limits, grace_seconds, bwrap)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _convert_in(
    scratch: Path, header: str, data: bytes, limits: ConvertLimits, grace_seconds: float, bwrap: bool
) -> Converted:
    process = spawn_confined([sys.executable, "-m", "backend.convert.worker"], scratch, bwrap=bwrap)
    try:
        out, err = process.communicate(
            header.encode() + b"\n" + data, timeout=limits.time_limit_seconds + grace_seconds
        )
    except subprocess.TimeoutExpired:
        _kill_group(process)
        process.communicate()
        return _too_long(limits)
    finally:
        if process.poll() is None:
            _kill_group(process)
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
    main()
