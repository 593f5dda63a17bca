"""`convert_isolated()`: the same conversion in a child process with a hard wall-clock and memory ceiling.

The in-process deadline is cooperative: it is checked between rows, chunks and pages, so one
pathological PDF page (pdfplumber's table finder on a page with a million rules) can still run long.
The child runs in its own process group and is killed with everything it started (tesseract,
pdftoppm) when the ceiling passes; its address space is capped with RLIMIT_AS.

The parsers read hostile files, so they do not run as root: the child starts in a fresh empty directory
of its own (its cwd, HOME and TMPDIR) with a clean environment, loads its modules, then, before it reads a
byte of the file, becomes the unprivileged converter user for good (`cleanroom-convert`, made by
scripts/setup; `nobody` when it is missing) with no supplementary groups and no_new_privs, and caps its
processes, file sizes and open files. It reads the file from stdin and answers on stdout, so it needs no
access to the data directory at all. A service not running as root has nothing to drop.

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

from backend.convert.model import Converted, ConvertLimits, Table

log = logging.getLogger("cleanroom.convert")

GRACE_SECONDS = 10.0  # interpreter start-up and serialisation on top of the conversion time limit
DEFAULT_MEMORY_BYTES = 2 * 1024**3
CONVERTER_USERS = ("cleanroom-convert", "nobody")  # the first that exists; scripts/setup makes the first
MAX_PROCESSES = 64  # per uid: the child, pdftoppm or tesseract, and their threads
MAX_FILE_BYTES = 256 * 1024**2  # one scratch file (a rendered page is tens of MB)
MAX_OPEN_FILES = 256
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TESSDATA_PREFIX")
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


def spawn_confined(argv: list[str], workdir: Path) -> subprocess.Popen:
    """Start `argv` for a conversion: the empty `workdir` (handed to the converter user) as cwd, HOME and
    TMPDIR, a clean environment, its own process group, stdin/stdout/stderr as pipes. The child drops to
    the converter user itself (`drop_privileges`) once its modules are loaded and before it reads the
    file: the interpreter may live where only root can read (pyenv under /root)."""
    identity = converter_identity()
    workdir.chmod(0o700)
    if identity is not None:
        os.chown(workdir, *identity)
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.update(HOME=str(workdir), TMPDIR=str(workdir), OMP_THREAD_LIMIT="1", PYTHONDONTWRITEBYTECODE="1")
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
    identity = converter_identity()
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


def confine(memory_bytes: int) -> None:
    """Run first in the child: ceilings it cannot raise again (it is not root)."""
    for limit, value in (
        (resource.RLIMIT_AS, memory_bytes),
        (resource.RLIMIT_NPROC, MAX_PROCESSES),
        (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))


def convert_isolated(
    data: bytes,
    filename: str,
    *,
    limits: ConvertLimits | None = None,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    grace_seconds: float = GRACE_SECONDS,
) -> Converted:
    limits = limits or ConvertLimits.from_settings()
    header = json.dumps({"filename": filename, "limits": dataclasses.asdict(limits), "memory": memory_bytes})
    scratch = Path(tempfile.mkdtemp(prefix="cleanroom-convert-"))
    try:
        return _convert_in(scratch, header, data, limits, grace_seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _convert_in(
    scratch: Path, header: str, data: bytes, limits: ConvertLimits, grace_seconds: float
) -> Converted:
    process = spawn_confined([sys.executable, "-m", "backend.convert.worker"], scratch)
    try:
        out, err = process.communicate(
            header.encode() + b"\n" + data, timeout=limits.time_limit_seconds + grace_seconds
        )
    except subprocess.TimeoutExpired:
        _kill_group(process)
        process.communicate()
        return Converted(
            error=f"Conversion took longer than the {limits.time_limit_seconds:g} s limit, so the file was not staged."
        )
    finally:
        if process.poll() is None:
            _kill_group(process)
    if process.returncode != 0 or not out:
        if process.returncode in (-signal.SIGKILL, -signal.SIGSEGV) or b"MemoryError" in err:
            return Converted(error="The file needs too much memory to convert and was not staged.")
        return Converted(
            error=f"The converter stopped unexpectedly (exit {process.returncode}); the file was not staged."
        )
    return from_json(out)


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
    preload()
    drop_privileges()
    confine(int(header.get("memory") or DEFAULT_MEMORY_BYTES))
    data = stdin.read()
    converted = convert(data, header["filename"], limits=ConvertLimits(**header["limits"]))
    sys.stdout.buffer.write(to_json(converted))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
