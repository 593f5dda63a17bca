"""The guest image: built from the recipe in vm_templates/image/ into a cache directory keyed by its hash.

An image directory holds `rootfs.squashfs` (Debian bookworm minbase + python3, the data libraries as PyPI
wheels pinned in python.lock plus the operator's extras, and the guest agent, read-only), `vmlinuz`
(linux-image-cloud-amd64), `initrd.img` (busybox + the virtio/squashfs/overlay modules), `image.json` (hashes,
versions) and `manifest.json` (the guest's python and package versions: backend/sandbox/guest_python.py).

The recipe hash covers the recipe folder (the lock included) and the operator's extras file. When the extras
changed and the image for them is not built (or its build was refused), the newest image built from the same
recipe folder keeps serving (`current_image`), flagged `extras_current: false`.
"""

from __future__ import annotations

import fcntl
import json
import lzma
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from backend.hashing import sha256_bytes, sha256_file, sha256_json
from backend.sandbox import guest_python
from backend.settings import REPO_ROOT, get_settings

RECIPE_DIR = REPO_ROOT / "vm_templates" / "image"
# Files of ours copied beside the agent (/usr/local/sbin), part of the recipe like the folder's own: the seccomp
# generator the host's file converter uses too (standard library only; the agent loads it by path).
AGENT_FILES = {"seccomp_filter.py": REPO_ROOT / "backend" / "seccomp_filter.py"}
# Bump when the build steps below change in a way that changes the image.
BUILDER_VERSION = 3
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageInfo:
    recipe_hash: str
    image_hash: str
    directory: Path
    kernel_version: str
    built_at: str
    rootfs_bytes: int
    base_recipe_hash: str = ""  # the recipe folder's alone, without the operator's extras
    extras_current: bool = True  # False: served in place of the image for the current extras (not built)

    @property
    def rootfs(self) -> Path:
        return self.directory / "rootfs.squashfs"

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.directory / "initrd.img"

    def as_dict(self) -> dict:
        data = asdict(self)
        data["directory"] = str(self.directory)
        return data


def load_recipe() -> dict:
    return json.loads((RECIPE_DIR / "recipe.json").read_text())


def base_recipe_hash() -> str:
    """The recipe folder's files (python.lock among them), the files beside the agent and the builder."""
    files = {p.name: sha256_bytes(p.read_bytes()) for p in sorted(RECIPE_DIR.iterdir()) if p.is_file()}
    files.update(
        {f"beside the agent/{name}": sha256_bytes(path.read_bytes()) for name, path in AGENT_FILES.items()}
    )
    return sha256_json({"builder": BUILDER_VERSION, "files": files})


def recipe_hash() -> str:
    """The base recipe and the operator's extra packages (their file's bytes, whether sdists are allowed)."""
    extras = guest_python.extras_fingerprint()
    base = base_recipe_hash()
    return base if extras is None else sha256_json({"base": base, "extras": extras})


def image_dir_for(hash_: str) -> Path:
    return get_settings().image_cache_dir / hash_[:16]


def _load(directory: Path) -> ImageInfo | None:
    meta = directory / "image.json"
    if not meta.is_file():
        return None
    data = json.loads(meta.read_text())
    data["directory"] = directory
    known = set(ImageInfo.__dataclass_fields__)
    info = ImageInfo(**{k: v for k, v in data.items() if k in known})
    if not (info.rootfs.is_file() and info.kernel.is_file() and info.initrd.is_file()):
        return None
    return info


def current_image() -> ImageInfo | None:
    """The built image for the current recipe; else, when only the operator's extras differ, the newest image
    built from the same recipe folder (the old image keeps serving while a new one is refused or not built yet,
    `extras_current` False); None when neither exists."""
    info = _load(image_dir_for(recipe_hash()))
    if info is not None:
        return info
    base, cache = base_recipe_hash(), get_settings().image_cache_dir
    candidates = []
    if cache.is_dir():
        for path in cache.iterdir():
            older = _load(path) if path.is_dir() and not path.name.startswith(".") else None
            if older is not None and older.base_recipe_hash == base:
                candidates.append(older)
    if not candidates:
        return None
    newest = max(candidates, key=lambda i: i.built_at)
    return ImageInfo(**{**newest.__dict__, "extras_current": False})


def manifest(image: ImageInfo | None = None) -> dict:
    """What the guest offers (python and package versions): the built image's manifest.json, else what the
    current recipe will install (read from the lock) with `"source": "lock"`."""
    image = image or current_image()
    path = image.directory / guest_python.MANIFEST if image else None
    if path is not None and path.is_file():
        data = json.loads(path.read_text())
        return {**data, "source": "image", "image_hash": image.image_hash}
    return {**guest_python.lock_fallback(), "source": "lock", "image_hash": None}


@contextmanager
def _build_lock(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".build.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: list[str], progress: Progress, label: str, **kwargs) -> None:
    progress(f"[{label}] $ {' '.join(cmd)}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-20:]
        if line:
            progress(f"[{label}] {line}")
    if proc.wait() != 0:
        raise RuntimeError(f"{label} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def ensure_image(force: bool = False, progress: Progress = print) -> ImageInfo:
    """Build the guest image unless one for the current recipe exists (or `force`)."""
    cache = get_settings().image_cache_dir
    with _build_lock(cache):
        existing = current_image()
        if existing and existing.extras_current and not force:
            progress(f"image up to date: {existing.directory} (image hash {existing.image_hash})")
            return existing
        return _build(cache, progress)


def check_guest_packages(
    work: Path, progress: Progress, index_args: list[str] | None = None
) -> tuple[list[guest_python.Pin], list[Path], list[str]]:
    """The build's check step, before anything else: the lock and the operator's extras parsed, every file
    downloaded with its hash required and checked to be a wheel for the guest (an sdist only when allowed).
    Raises GuestPackagesRefused with the reason; nothing built so far is kept, no image is replaced.
    `index_args`: pip's index options instead of PyPI (the tests' local folder)."""
    extras_path = guest_python.extras_file()
    allow_sdist = get_settings().guest_allow_sdist
    pins = guest_python.check_requirements(guest_python.locked(), extras_path)
    locked_names = {p.name for p in guest_python.locked()}
    extras = [p.name for p in pins if p.name not in locked_names]
    files = guest_python.download(
        pins,
        work / "wheels",
        progress,
        allow_sdist=allow_sdist,
        extras_path=extras_path,
        index_args=index_args,
    )
    return pins, files, extras


def _build(cache: Path, progress: Progress) -> ImageInfo:
    recipe = load_recipe()
    rhash = recipe_hash()
    final = image_dir_for(rhash)
    work = cache / f".build-{rhash[:16]}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.monotonic()
    try:
        progress(f"building guest image (recipe {rhash[:16]}) in {work}")
        pins, wheels, extras = check_guest_packages(work, progress)
        root = work / "root"
        _debootstrap(recipe, root, cache, progress)
        guest_python.install(wheels, root, progress, allow_sdist=get_settings().guest_allow_sdist)
        shutil.rmtree(work / "wheels")
        _customize_root(recipe, root, progress)
        _write_manifest(recipe, root, work, pins, extras, progress)
        progress("[squashfs] packing the read-only root")
        _run(
            ["mksquashfs", str(root), str(work / "rootfs.squashfs"), "-comp", recipe["squashfs_compression"]]
            + ["-noappend", "-no-progress", "-quiet"],
            progress,
            "squashfs",
        )
        shutil.rmtree(root)
        kernel_version = _fetch_kernel(recipe, work, progress)
        _build_initramfs(recipe, work, kernel_version, progress)
        shutil.rmtree(work / "kernel")
        progress("[hash] hashing the artifacts")
        names = ("rootfs.squashfs", "vmlinuz", "initrd.img", guest_python.MANIFEST)
        artifacts = {name: sha256_file(work / name) for name in names}
        image_hash = sha256_json({"recipe": rhash, "artifacts": artifacts})
        info = ImageInfo(
            recipe_hash=rhash,
            image_hash=image_hash,
            directory=final,
            kernel_version=kernel_version,
            built_at=datetime.now(UTC).isoformat(timespec="seconds"),
            rootfs_bytes=(work / "rootfs.squashfs").stat().st_size,
            base_recipe_hash=base_recipe_hash(),
        )
        meta = info.as_dict()
        meta.pop("directory")
        meta.pop("extras_current")
        (work / "image.json").write_text(json.dumps(meta, indent=2) + "\n")
        (work / "artifacts.json").write_text(json.dumps(artifacts, indent=2) + "\n")
        for path in work.iterdir():
            path.chmod(0o644)
        work.chmod(0o755)
        if final.exists():
            shutil.rmtree(final)
        work.rename(final)
        _remove_stale_images(cache, keep=final)
        progress(f"image built in {time.monotonic() - started:.0f} s: {final}")
        progress(f"image hash {image_hash}")
        return info
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


KEEP_IMAGES = 3


def _remove_stale_images(cache: Path, keep: Path) -> None:
    """Keep the newest few images: other checkouts (older recipes) on this host may still use theirs."""
    images = sorted(
        (p for p in cache.iterdir() if p.is_dir() and p != keep and (p / "image.json").exists()),
        key=lambda p: (p / "image.json").stat().st_mtime,
        reverse=True,
    )
    for path in images[KEEP_IMAGES - 1 :]:
        shutil.rmtree(path, ignore_errors=True)


def _debootstrap(recipe: dict, root: Path, cache: Path, progress: Progress) -> None:
    debs = cache / "debootstrap-debs"
    debs.mkdir(parents=True, exist_ok=True)
    _run(
        [
            "debootstrap",
            f"--variant={recipe['variant']}",
            f"--cache-dir={debs}",
            "--include=" + ",".join(recipe["packages"]),
            recipe["suite"],
            str(root),
            recipe["mirror"],
        ],
        progress,
        "debootstrap",
    )


def _customize_root(recipe: dict, root: Path, progress: Progress) -> None:
    progress("[root] adding the runner user, the agent and the matplotlib font cache")
    uid = recipe["runner_uid"]
    with open(root / "etc/passwd", "a") as fh:
        fh.write(f"runner:x:{uid}:{uid}:Cleanroom user code:/work:/usr/sbin/nologin\n")
    with open(root / "etc/group", "a") as fh:
        fh.write(f"runner:x:{uid}:\n")
    with open(root / "etc/shadow", "a") as fh:
        fh.write("runner:!:19000:0:99999:7:::\n")
    install_agent(root / "usr/local/sbin")
    for directory in ("work", "var/cache/cleanroom-mpl"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "etc/hostname").write_text("cleanroom\n")
    site = root / guest_python.SITE
    for name in recipe["python_prune"]:  # the packages' own test suites and C headers: never imported
        for path in site.glob(name):
            shutil.rmtree(path, ignore_errors=True)
    # every offered module imports (a missing system library fails the build, not a run); the font cache
    _run(
        [
            shutil.which("chroot") or "/usr/sbin/chroot",
            str(root),
            "/usr/bin/python3",
            "-c",
            "import matplotlib; matplotlib.use('Agg'); import " + ", ".join(recipe["python_imports"]),
        ],
        progress,
        "root",
        env=_CHROOT_ENV,
    )
    # Nothing in the guest may raise privileges: strip every setuid/setgid bit.
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            st = path.lstat()
            if not path.is_symlink() and st.st_mode & 0o6000:
                path.chmod(st.st_mode & 0o1777)
    for rel in recipe["remove_paths"]:
        target = root / rel
        if target.is_dir():
            shutil.rmtree(target)
            target.mkdir()


_CHROOT_ENV = {"MPLCONFIGDIR": "/var/cache/cleanroom-mpl", "PATH": "/usr/bin:/bin", "HOME": "/root"}

# In the image's own interpreter: each extra's top-level modules import (an extra that cannot is refused).
_EXTRAS_IMPORT = """\
import importlib, importlib.metadata as m, sys
wanted = set(sys.argv[1:])
norm = lambda n: n.replace("_", "-").replace(".", "-").lower()
for module, dists in m.packages_distributions().items():
    if wanted & {norm(d) for d in dists} and not module.startswith("_"):
        importlib.import_module(module)
"""


def _write_manifest(
    recipe: dict, root: Path, work: Path, pins: list[guest_python.Pin], extras: list[str], progress: Progress
) -> None:
    chroot = [shutil.which("chroot") or "/usr/sbin/chroot", str(root), "/usr/bin/python3"]
    if extras:
        progress(f"[root] importing the operator's extras: {' '.join(extras)}")
        done = subprocess.run(
            [*chroot, "-c", _EXTRAS_IMPORT, *extras], capture_output=True, text=True, env=_CHROOT_ENV
        )
        if done.returncode != 0:
            raise guest_python.GuestPackagesRefused(
                f"guest packages refused: an extra package does not import in the guest:\n{done.stderr[-2000:]}"
            )
    done = subprocess.run(
        [*chroot, "-I", "-c", guest_python.MANIFEST_PROBE],
        capture_output=True,
        text=True,
        check=True,
        env=_CHROOT_ENV,
    )
    written = guest_python.write_manifest(done.stdout, pins, extras, work)
    progress(f"[root] python {written['python']}: {guest_python.offered_summary(written)}")


def install_agent(folder: Path) -> Path:
    """The agent into `folder` (the image's /usr/local/sbin), with AGENT_FILES beside it; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    agent = folder / "cleanroom-agent"
    shutil.copyfile(RECIPE_DIR / "cleanroom-agent", agent)
    agent.chmod(0o700)
    for name, source in AGENT_FILES.items():
        shutil.copyfile(source, folder / name)
        (folder / name).chmod(0o600)  # read by the agent (root) before any user code
    return agent


def _fetch_kernel(recipe: dict, work: Path, progress: Progress) -> str:
    meta = recipe["kernel_package"]
    out = subprocess.run(
        ["apt-cache", "depends", "--important", meta], capture_output=True, text=True, check=True
    )
    versioned = [
        line.split(":", 1)[1].strip()
        for line in out.stdout.splitlines()
        if line.strip().startswith("Depends:") and "linux-image-" in line
    ]
    if not versioned:
        raise RuntimeError(f"cannot resolve {meta} to a kernel package (run apt-get update?)")
    package = versioned[0]
    downloads = work / "debs"
    downloads.mkdir()
    _run(["apt-get", "download", package], progress, "kernel", cwd=downloads)
    deb = next(downloads.glob("*.deb"))
    kdir = work / "kernel"
    _run(["dpkg-deb", "-x", str(deb), str(kdir)], progress, "kernel")
    shutil.rmtree(downloads)
    vmlinuz = next((kdir / "boot").glob("vmlinuz-*"))
    kernel_version = vmlinuz.name.removeprefix("vmlinuz-")
    shutil.copyfile(vmlinuz, work / "vmlinuz")
    progress(f"[kernel] {package} ({kernel_version})")
    return kernel_version


def _module_depends(path: Path) -> list[str]:
    """The `depends=` field of a module's .modinfo (no depmod/kmod needed on the host)."""
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        data = lzma.decompress(data)
    match = re.search(rb"(?:^|\x00)depends=([^\x00]*)\x00", data)
    return [d for d in match.group(1).decode().split(",") if d] if match else []


def _module_name(path: Path) -> str:
    return path.name.split(".ko")[0].replace("-", "_")


def _module_closure(moddir: Path, wanted: list[str]) -> list[str]:
    """Module paths (relative to moddir) in load order: dependencies first."""
    by_name = {_module_name(p): p for p in (moddir / "kernel").rglob("*.ko*")}
    builtin = {
        _module_name(Path(line.strip())) for line in (moddir / "modules.builtin").read_text().splitlines()
    }
    order: list[str] = []

    def visit(name: str) -> None:
        name = name.replace("-", "_")
        if name in builtin:
            return
        if name not in by_name:
            raise RuntimeError(f"kernel module {name} is neither a module nor built in")
        rel = by_name[name].relative_to(moddir).as_posix()
        if rel in order:
            return
        for dep in _module_depends(by_name[name]):
            visit(dep)
        order.append(rel)

    for name in wanted:
        visit(name)
    return order


def _build_initramfs(recipe: dict, work: Path, kernel_version: str, progress: Progress) -> None:
    progress("[initramfs] busybox + modules")
    moddir = work / "kernel" / "lib" / "modules" / kernel_version
    initramfs = work / "initramfs"
    for sub in ("bin", "dev", "proc", "sys", "etc", "lib/modules"):
        (initramfs / sub).mkdir(parents=True, exist_ok=True)
    shutil.copyfile("/bin/busybox", initramfs / "bin/busybox")
    (initramfs / "bin/busybox").chmod(0o755)
    shutil.copyfile(RECIPE_DIR / "init", initramfs / "init")
    (initramfs / "init").chmod(0o755)
    names = []
    for rel in _module_closure(moddir, recipe["initramfs_modules"]):
        source = moddir / rel
        name = Path(rel).name
        data = source.read_bytes()
        if name.endswith(".xz"):
            data, name = lzma.decompress(data), name.removesuffix(".xz")
        elif name.endswith(".zst"):
            data = subprocess.run(["zstd", "-dc", str(source)], capture_output=True, check=True).stdout
            name = name.removesuffix(".zst")
        (initramfs / "lib/modules" / name).write_bytes(data)
        names.append(name)
    (initramfs / "etc/modules.load").write_text("\n".join(names) + "\n")
    progress(f"[initramfs] modules: {' '.join(names)}")
    with open(work / "initrd.img", "wb") as out:
        find = subprocess.Popen(["find", ".", "-print0"], cwd=initramfs, stdout=subprocess.PIPE)
        cpio = subprocess.Popen(
            ["cpio", "--null", "-o", "-H", "newc", "--quiet", "-R", "0:0"],
            cwd=initramfs,
            stdin=find.stdout,
            stdout=subprocess.PIPE,
        )
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=out)
        assert find.stdout and cpio.stdout
        find.stdout.close()
        cpio.stdout.close()
        if gz.wait() or cpio.wait() or find.wait():
            raise RuntimeError("packing the initramfs failed")
    shutil.rmtree(initramfs)
