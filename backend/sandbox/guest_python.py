"""The guest's Python packages: PyPI wheels pinned with their sha256 in `vm_templates/image/python.lock`, plus
the operator's hash-pinned extras (`CLEANROOM_GUEST_REQUIREMENTS`), downloaded on the host at image build and
installed into the image offline (the guest never has a network). The built image's `manifest.json` (python
version, every package's version, which ones are offered) is the one source of truth for what the guest has:
the MCP contract, `GET /api/sandbox/environment`, the approval screen and `cleanroom health` read it.

Checks (`check_requirements`, `download`), each a clear `GuestPackagesRefused` that stops the build before
anything is replaced: a line that is not `name==version` with at least one `--hash=sha256:`, an extra that
names a locked package at another version, a package the index does not have, a download whose hash is not
the pinned one, and an sdist (its build runs code) unless the operator set `CLEANROOM_GUEST_ALLOW_SDIST=1`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.settings import REPO_ROOT, get_settings

RECIPE_DIR = REPO_ROOT / "vm_templates" / "image"
LOCK = RECIPE_DIR / "python.lock"  # every package with its version and the guest wheel's sha256
REQUESTED = RECIPE_DIR / "python.in"  # what the lock was resolved from: the packages offered to assistants
MANIFEST = "manifest.json"  # in the image directory
GUEST_PYTHON = "3.11"  # Debian bookworm's CPython (recipe.json installs python3)
GUEST_ABI = "cp311"
# bookworm's glibc is 2.36: every manylinux tag up to it, newest first (pip takes each --platform literally)
GUEST_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
SITE = "usr/local/lib/python3.11/dist-packages"  # on the guest's sys.path, apart from Debian's own
Progress = Callable[[str], None]

_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")


class GuestPackagesRefused(RuntimeError):
    """A requirements file or a download the image build refuses; the message says which line and why."""


@dataclass(frozen=True)
class Pin:
    name: str  # normalized (PEP 503)
    version: str
    hashes: tuple[str, ...]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirements(path: Path) -> list[Pin]:
    """`name==version --hash=sha256:…` lines (backslash continuations and # comments allowed); anything else,
    a missing hash or a name twice is refused with the file and line."""
    text = path.read_text()
    logical: list[tuple[int, str]] = []
    current, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not current:
            start = number
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append((start, current.strip()))
        current = ""
    pins: list[Pin] = []
    seen: set[str] = set()
    for number, line in logical:
        words = line.split()
        match = _LINE.match(words[0])
        if not match:
            raise GuestPackagesRefused(
                f"{path}:{number}: {words[0]!r} is not pinned as name==version (no ranges, URLs or options)"
            )
        hashes = []
        for word in words[1:]:
            hashed = _HASH.match(word)
            if not hashed:
                raise GuestPackagesRefused(f"{path}:{number}: {word!r} is not --hash=sha256:<64 hex digits>")
            hashes.append(hashed.group(1))
        name = normalize(match.group(1))
        if not hashes:
            raise GuestPackagesRefused(f"{path}:{number}: {name}=={match.group(2)} has no --hash=sha256:")
        if name in seen:
            raise GuestPackagesRefused(f"{path}:{number}: {name} is listed twice")
        seen.add(name)
        pins.append(Pin(name, match.group(2), tuple(hashes)))
    return pins


def locked() -> list[Pin]:
    return parse_requirements(LOCK)


def requested() -> list[str]:
    """The packages the lock was resolved from (python.in), normalized: what the guest offers by name."""
    names = []
    for line in REQUESTED.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(normalize(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]))
    return names


def extras_file() -> Path | None:
    path = get_settings().guest_requirements
    return Path(path) if path else None


def extras_fingerprint() -> dict[str, Any] | None:
    """What the operator's extras add to the recipe hash: the file's bytes and whether sdists are allowed.
    None when there are none (the recipe hash is then the lock's alone)."""
    path = extras_file()
    if path is None:
        return None
    data = path.read_bytes() if path.is_file() else b"(missing)"
    return {"sha256": hashlib.sha256(data).hexdigest(), "allow_sdist": get_settings().guest_allow_sdist}


def check_requirements(lock: list[Pin], extras_path: Path | None) -> list[Pin]:
    """The lock plus the operator's extras, checked before anything is downloaded; the whole list."""
    if extras_path is None:
        return list(lock)
    if not extras_path.is_file():
        raise GuestPackagesRefused(f"CLEANROOM_GUEST_REQUIREMENTS: {extras_path} is not a file")
    extras = parse_requirements(extras_path)
    pinned = {p.name: p for p in lock}
    out = list(lock)
    for pin in extras:
        if pin.name in pinned:
            if pinned[pin.name].version != pin.version:
                raise GuestPackagesRefused(
                    f"{extras_path}: {pin.name}=={pin.version} conflicts with the guest's locked "
                    f"{pin.name}=={pinned[pin.name].version} (vm_templates/image/python.lock)"
                )
            continue  # the locked one is installed; its hash was checked in the lock
        out.append(pin)
    return out


def _requirements_text(pins: list[Pin]) -> str:
    return "".join(
        f"{p.name}=={p.version} " + " ".join(f"--hash=sha256:{h}" for h in p.hashes) + "\n" for p in pins
    )


def _platform_args() -> list[str]:
    args = ["--python-version", GUEST_PYTHON, "--implementation", "cp"]
    for abi in (GUEST_ABI, "abi3", "none"):
        args += ["--abi", abi]
    for platform in GUEST_PLATFORMS:
        args += ["--platform", platform]
    return args


def _explain(output: str, extras_path: Path | None) -> str:
    """pip's failure as one sentence an operator acts on, pip's own lines after it."""
    lines = [line for line in output.splitlines() if "is ignored:" not in line]
    errors = next((i for i, line in enumerate(lines) if line.startswith("ERROR:")), 0)
    tail = "\n".join(lines[errors:])[-3000:]  # pip's own reason, not its download log
    where = f" (check {extras_path})" if extras_path else ""
    if "DO NOT MATCH THE HASHES" in output:
        reason = f"a downloaded file does not match its pinned sha256{where}"
    elif "No matching distribution found" in output or "Could not find a version" in output:
        missing = re.findall(r"No matching distribution found for (\S+)", output)
        reason = f"no wheel for the guest (CPython {GUEST_PYTHON}, manylinux x86_64) of {', '.join(missing) or 'a package'}"
        reason += ": unknown package or version, or it ships only an sdist (refused: its build runs code; set"
        reason += f" CLEANROOM_GUEST_ALLOW_SDIST=1 to allow sdists){where}"
    else:
        reason = f"pip download failed{where}"
    return f"guest packages refused: {reason}\n{tail}"


def download(
    pins: list[Pin],
    dest: Path,
    progress: Progress,
    *,
    allow_sdist: bool = False,
    extras_path: Path | None = None,
    index_args: list[str] | None = None,
) -> list[Path]:
    """Every pinned file into `dest` with pip, hashes required (`--require-hashes`), wheels for the guest's
    platform only unless `allow_sdist`; then every file is checked to be a wheel (or an sdist, when allowed).
    `index_args` replaces the default index (tests point it at a local folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    reqs = dest.parent / f"{dest.name}.requirements.txt"
    reqs.write_text(_requirements_text(pins))
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        "--disable-pip-version-check",
    ]
    cmd += ["--no-cache-dir"] if index_args else []
    cmd += index_args or []
    cmd += ["-d", str(dest), "-r", str(reqs)]
    if not allow_sdist:
        cmd += ["--only-binary=:all:", *_platform_args()]
    progress(f"[wheels] downloading {len(pins)} pinned packages (hashes required)")
    done = subprocess.run(cmd, capture_output=True, text=True)
    reqs.unlink()
    if done.returncode != 0:
        raise GuestPackagesRefused(_explain(done.stdout + done.stderr, extras_path))
    files = sorted(p for p in dest.iterdir() if p.is_file())
    by_name = {normalize(_dist_name(f)): f for f in files}
    for pin in pins:
        got = by_name.get(pin.name)
        if got is None:
            raise GuestPackagesRefused(f"guest packages refused: pip downloaded nothing for {pin.name}")
        if hashlib.sha256(got.read_bytes()).hexdigest() not in pin.hashes:  # pip checked; so do we
            raise GuestPackagesRefused(f"guest packages refused: {got.name} does not match its pinned sha256")
        if not got.name.endswith(".whl") and not allow_sdist:
            raise GuestPackagesRefused(
                f"guest packages refused: {pin.name}=={pin.version} is an sdist ({got.name}): building it runs "
                "its code at image build; set CLEANROOM_GUEST_ALLOW_SDIST=1 to allow it"
            )
    return files


def _dist_name(path: Path) -> str:
    name = path.name
    if name.endswith(".whl"):
        return name.split("-")[0]
    for suffix in (".tar.gz", ".zip", ".tar.bz2"):
        name = name.removesuffix(suffix)
    return name.rsplit("-", 1)[0]


def install(files: list[Path], root: Path, progress: Progress, *, allow_sdist: bool = False) -> None:
    """The downloaded files into the image root's site directory with no index at all (offline), no
    dependency resolution (the lock is complete). An allowed sdist is built into a wheel on this host first."""
    wheels = [f for f in files if f.name.endswith(".whl")]
    sdists = [f for f in files if not f.name.endswith(".whl")]
    if sdists:
        if not allow_sdist:
            raise GuestPackagesRefused(f"guest packages refused: sdists {[f.name for f in sdists]}")
        built = files[0].parent / "built"
        progress(f"[wheels] building {len(sdists)} sdist(s) the operator allowed")
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(built), *map(str, sdists)],
            check=True,
            capture_output=True,
        )
        wheels += sorted(built.glob("*.whl"))
    target = root / SITE
    target.mkdir(parents=True, exist_ok=True)
    uv = Path(sys.executable).with_name(
        "uv"
    )  # scripts/setup installs it; twice as fast as pip here (74 s/125 s)
    if uv.is_file():
        cmd = [
            str(uv),
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--offline",
            "--no-deps",
            "--compile-bytecode",
        ]
        cmd += [
            "--target",
            str(target),
            "--python-version",
            GUEST_PYTHON,
            "--python-platform",
            "x86_64-manylinux_2_36",
        ]
    else:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
        ]
        cmd += [
            "--target",
            str(target),
            "--only-binary=:all:",
            *_platform_args(),
            "--platform",
            "linux_x86_64",
        ]
    progress(f"[wheels] installing {len(wheels)} wheels offline into /{SITE}")
    done = subprocess.run([*cmd, *map(str, wheels)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"installing the guest's wheels failed:\n{(done.stdout + done.stderr)[-3000:]}")
    shutil.rmtree(
        target / "bin", ignore_errors=True
    )  # console scripts: their shebang names the host's python


MANIFEST_PROBE = """\
import importlib.metadata as m, json, platform
print(json.dumps({"python": platform.python_version(),
                  "packages": {d.metadata["Name"]: d.version for d in m.distributions()}}))
"""


def write_manifest(probe_stdout: str, pins: list[Pin], extras: list[str], directory: Path) -> dict[str, Any]:
    """manifest.json from what the image's own interpreter reports, beside what was pinned."""
    found = json.loads(probe_stdout)
    packages = {
        normalize(k): v for k, v in sorted(found["packages"].items(), key=lambda kv: normalize(kv[0]))
    }
    for pin in pins:
        if packages.get(pin.name) != pin.version:
            raise RuntimeError(f"the image reports {pin.name} {packages.get(pin.name)}, pinned {pin.version}")
    manifest = {
        "python": found["python"],
        "packages": packages,
        "offered": [name for name in requested() + extras if name in packages],
        "extras": extras,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def lock_fallback() -> dict[str, Any]:
    """What the current recipe will put in the guest, read from the lock (and the operator's extras file when
    it parses): for a host that has no built image (a control plane apart from its workers)."""
    pins = {p.name: p.version for p in locked()}
    extras: list[str] = []
    path = extras_file()
    try:
        for pin in parse_requirements(path) if path and path.is_file() else []:
            pins.setdefault(pin.name, pin.version)
            extras.append(pin.name)
    except GuestPackagesRefused:
        pass
    return {
        "python": GUEST_PYTHON,
        "packages": dict(sorted(pins.items())),
        "offered": [n for n in requested() + extras if n in pins],
        "extras": extras,
    }


def offered_summary(manifest: dict[str, Any]) -> str:
    """`pandas 2.3.3, numpy 2.4.6, …` for what the guest offers by name, in the order of python.in."""
    packages = manifest["packages"]
    return ", ".join(f"{name} {packages[name]}" for name in manifest["offered"])


def resolve_lock(progress: Progress = print) -> Path:
    """Re-resolve python.in into python.lock (a maintainer's step, with uv and PyPI): the newest versions that
    have wheels for the guest, each pinned with the sha256 of the one wheel the guest installs."""
    import tempfile

    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is needed to resolve the lock (a dev dependency: pip install -e '.[dev]')")
    compiled = subprocess.run(
        [uv, "pip", "compile", str(REQUESTED), "--python-version", GUEST_PYTHON, "--python-platform",
         "x86_64-manylinux_2_36", "--only-binary", ":all:", "--no-header", "--no-annotate", "--quiet"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    versions = [line.strip() for line in compiled.splitlines() if "==" in line]
    with tempfile.TemporaryDirectory(prefix="cleanroom-lock-") as tmp:
        dest = Path(tmp) / "wheels"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *_platform_args(),
             "-d", str(dest), *versions],
            check=True, capture_output=True,
        )  # fmt: skip
        lines = [
            "# The guest's Python packages: PyPI wheels for CPython 3.11 manylinux x86_64, each pinned to the\n",
            "# sha256 of the one wheel the image installs. Generated from python.in by `cleanroom image lock`;\n",
            "# part of the recipe hash (a change rebuilds the image).\n",
        ]
        files = {normalize(_dist_name(f)): f for f in dest.iterdir()}
        for pin in versions:
            name, version = pin.split("==")
            digest = hashlib.sha256(files[normalize(name)].read_bytes()).hexdigest()
            lines.append(f"{normalize(name)}=={version} \\\n    --hash=sha256:{digest}\n")
    LOCK.write_text("".join(lines))
    progress(f"{LOCK}: {len(versions)} packages")
    return LOCK
