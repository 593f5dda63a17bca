"""The guest's packages at the image build's check step (backend/sandbox/image.py `check_guest_packages`): an
operator's extra that is unknown, whose download does not match its pinned hash, that is only an sdist, or that
is not pinned stops the build with a message naming it, and the image built before keeps serving; a good extra
passes. pip runs against a local folder instead of PyPI (no network here); the lock is a one-line stand-in."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from backend.sandbox import guest_python, image
from backend.settings import get_settings


def _wheel(folder: Path, name: str, version: str) -> Path:
    dist = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "VALUE = 42\n")
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


def _sdist(folder: Path, name: str, version: str) -> Path:
    path = folder / f"{name}-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for member, text in {
            "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            "setup.py": "raise SystemExit('an sdist build ran: the check must refuse before this')\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{member}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("index")
    return {
        "folder": folder,
        "locked": _wheel(folder, "lockedpkg", "1.0"),
        "extra": _wheel(folder, "cleanroom_extra", "2.0"),
        "sdist": _sdist(folder, "sdistonly", "1.0"),
    }


@pytest.fixture
def setup(index: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A one-package lock, the image cache in tmp_path, and `extras(text)` to write the operator's file."""
    lock = tmp_path / "python.lock"
    lock.write_text(f"lockedpkg==1.0 \\\n    --hash=sha256:{_sha(index['locked'])}\n")
    monkeypatch.setattr(guest_python, "LOCK", lock)
    monkeypatch.setenv("CLEANROOM_IMAGE_CACHE_DIR", str(tmp_path / "cache"))
    get_settings.cache_clear()

    def extras(text: str | None) -> None:
        if text is None:
            monkeypatch.delenv("CLEANROOM_GUEST_REQUIREMENTS", raising=False)
        else:
            (tmp_path / "extra.txt").write_text(text)
            monkeypatch.setenv("CLEANROOM_GUEST_REQUIREMENTS", str(tmp_path / "extra.txt"))
        get_settings.cache_clear()

    yield extras
    monkeypatch.delenv("CLEANROOM_GUEST_REQUIREMENTS", raising=False)
    monkeypatch.delenv("CLEANROOM_IMAGE_CACHE_DIR")
    get_settings.cache_clear()


def _check(index: dict, work: Path):
    args = ["--isolated", "--no-index", "--find-links", str(index["folder"])]  # no pip.conf, no PIP_* links
    return image.check_guest_packages(work, lambda _m: None, index_args=args)


def _built_image(cache: Path, base: str) -> Path:
    """An image directory as a finished build leaves it (the files' contents do not matter here)."""
    directory = cache / base[:16]
    directory.mkdir(parents=True)
    for name in ("rootfs.squashfs", "vmlinuz", "initrd.img"):
        (directory / name).write_bytes(b"x")
    meta = {
        "recipe_hash": base,
        "image_hash": "old-image",
        "kernel_version": "6",
        "built_at": "2026-01-01T00:00:00",
    }
    (directory / "image.json").write_text(json.dumps({**meta, "rootfs_bytes": 1, "base_recipe_hash": base}))
    return directory


def test_a_pinned_wheel_extra_passes_and_changes_the_recipe_hash(index: dict, setup, tmp_path: Path) -> None:
    setup(None)
    without = image.recipe_hash()
    setup(f"cleanroom-extra==2.0 --hash=sha256:{_sha(index['extra'])}\n")
    pins, files, extras = _check(index, tmp_path / "work")
    assert extras == ["cleanroom-extra"] and [p.name for p in pins] == ["lockedpkg", "cleanroom-extra"]
    assert sorted(f.name for f in files) == sorted([index["locked"].name, index["extra"].name])
    with_extra = image.recipe_hash()
    assert with_extra != without and image.base_recipe_hash() == without
    setup(f"cleanroom-extra==2.0 --hash=sha256:{_sha(index['extra'])}\n# another version of the file\n")
    assert image.recipe_hash() not in (with_extra, without)  # the file's bytes, not its path


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("nosuchpackage==1.0 --hash=sha256:" + "0" * 64, "no wheel for the guest (CPython 3.11"),
        ("cleanroom-extra==2.0 --hash=sha256:" + "0" * 64, "does not match its pinned sha256"),
        (
            "sdistonly==1.0 --hash=sha256:{sdist}",
            "only an sdist (refused: its build runs code; set CLEANROOM_GUEST_ALLOW_SDIST=1",
        ),
        ("cleanroom-extra>=2 --hash=sha256:{extra}", "is not pinned as name==version"),
        ("cleanroom-extra==2.0", "has no --hash=sha256:"),
        ("lockedpkg==0.9 --hash=sha256:{extra}", "conflicts with the guest's locked lockedpkg==1.0"),
    ],
    ids=["unknown", "hash-mismatch", "sdist", "unpinned", "no-hash", "conflicts-with-lock"],
)
def test_a_bad_extra_stops_the_build_and_the_old_image_keeps_serving(
    index: dict, setup, tmp_path: Path, line: str, says: str
) -> None:
    setup(None)
    old = _built_image(tmp_path / "cache", image.base_recipe_hash())
    assert image.current_image().directory == old and image.current_image().extras_current
    setup(line.format(sdist=_sha(index["sdist"]), extra=_sha(index["extra"])) + "\n")
    with pytest.raises(guest_python.GuestPackagesRefused) as refused:
        _check(index, tmp_path / "work")
    assert says in str(refused.value)
    serving = image.current_image()  # what runs get: the image built before, flagged as not the extras'
    assert serving is not None and serving.directory == old and serving.extras_current is False
    assert image.manifest(serving)["source"] == "lock"  # this stand-in image has no manifest.json


def test_an_image_of_another_recipe_is_never_served_in_its_place(index: dict, setup, tmp_path: Path) -> None:
    _built_image(tmp_path / "cache", "f" * 64)  # another recipe folder (another lock, another agent)
    setup(None)
    assert image.current_image() is None


def test_the_manifest_is_what_the_image_reports_with_the_extras_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guest_python, "requested", lambda: ["lockedpkg"])
    pins = [
        guest_python.Pin("lockedpkg", "1.0", ("a" * 64,)),
        guest_python.Pin("cleanroom-extra", "2.0", ("b" * 64,)),
    ]
    probe = {"python": "3.11.2", "packages": {"lockedpkg": "1.0", "Cleanroom_Extra": "2.0", "dep": "0.1"}}
    written = guest_python.write_manifest(json.dumps(probe), pins, ["cleanroom-extra"], tmp_path)
    assert json.loads((tmp_path / "manifest.json").read_text()) == written
    assert written["offered"] == ["lockedpkg", "cleanroom-extra"] and written["extras"] == ["cleanroom-extra"]
    assert guest_python.offered_summary(written) == "lockedpkg 1.0, cleanroom-extra 2.0"  # health's line
    # an image whose interpreter reports another version than the lock pinned is not given a manifest
    probe["packages"]["lockedpkg"] = "0.9"
    with pytest.raises(RuntimeError, match="reports lockedpkg 0.9, pinned 1.0"):
        guest_python.write_manifest(json.dumps(probe), pins, ["cleanroom-extra"], tmp_path / "other")
