"""The console keeps no one's session readable by another local account (N-M1, L5).

`cleanroom serve` started under umask 022 (the usual login shell's), a person signs in through the real
console in headless Chromium: NiceGUI's storage, which holds her API session, is in the data directory,
the folder 0700 and every file 0600; nothing lands in the checkout's `.nicegui`; the console's cookie is
HttpOnly and SameSite=Lax. The positive controls show what the same NiceGUI code does under umask 022 when
nobody sets the storage's place and modes: the review's 0644 files."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.settings import Settings
from console import storage
from console.main import cookie_options
from tests.console.test_browser import browser
from tests.support.browser import sign_in
from tests.support.servers import REPO, Servers

__all__ = ["browser"]  # the headless Chromium fixture of the other browser tests, used here too

LOOSE_UMASK = 0o022


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _modes_of(root: Path, paths: list[Path]) -> dict[str, int]:
    """Each file's mode by its name under `root`, leaving out a file gone since it was listed: SQLite's
    `-shm` and `-wal` come and go with its connections (the service runs on while this test reads), and a file
    that no longer exists is readable by no one. CI once failed on exactly that (FileNotFoundError on -shm)."""
    modes = {}
    for path in paths:
        try:
            modes[str(path.relative_to(root))] = mode(path)
        except FileNotFoundError:
            continue
    return modes


def _sessions_in(folder: Path) -> dict[str, str]:
    """{file name: the e-mail whose API session it holds} for NiceGUI's user storage files in `folder`."""
    found = {}
    for path in folder.glob("storage-user-*.json"):
        data = json.loads(path.read_text())
        if data.get("session"):
            found[path.name] = (data.get("me") or {}).get("email", "")
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    running = Servers(tmp_path_factory.mktemp("console-storage"), umask=LOOSE_UMASK, console_by_serve=True)
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.browser
@pytest.mark.slow
def test_after_a_sign_in_the_session_is_stored_0600_in_a_0700_folder(served: Servers, browser) -> None:
    legacy_before = _sessions_in(REPO / ".nicegui")
    sign_in(browser, served, "maria@acme.example")
    folder = served.data_dir / storage.STORAGE_DIR
    for _ in range(50):  # NiceGUI writes the storage from a background task, right after the change
        if "maria@acme.example" in _sessions_in(folder).values():
            break
        time.sleep(0.1)
    # positive control: this is where her session is (we look at the right files)
    assert "maria@acme.example" in _sessions_in(folder).values(), sorted(os.listdir(folder))
    assert mode(folder) == 0o700
    files = list(folder.iterdir())
    assert files and {p.name: oct(mode(p)) for p in files} == {p.name: oct(0o600) for p in files}
    # nothing in the checkout (the review found the sessions in ./.nicegui, 0644)
    assert _sessions_in(REPO / ".nicegui").keys() <= legacy_before.keys()
    # the secrets beside it, the console's too
    for name in ("console_storage_secret", "console_forward_secret"):
        assert mode(served.data_dir / name) == 0o600, name
    # and no other file in the data directory is readable by another account (the servers' logs aside:
    # this test makes them, under its own umask)
    made = [p for p in served.data_dir.rglob("*") if p.is_file() and not p.name.endswith(".log")]
    assert {name: oct(bits) for name, bits in _modes_of(served.data_dir, made).items() if bits & 0o077} == {}


@pytest.mark.browser
@pytest.mark.slow
def test_the_consoles_cookie_is_httponly_and_samesite_lax(served: Servers) -> None:
    r = httpx.get(served.console_url + "/login", timeout=30)
    cookies = [c.lower() for c in r.headers.get_list("set-cookie")]
    session = [c for c in cookies if c.startswith("session=")]
    assert session, cookies
    assert "httponly" in session[0] and "samesite=lax" in session[0]
    assert "secure" not in session[0]  # plain http on localhost: a Secure cookie would never come back


def test_the_cookie_is_secure_when_people_reach_the_console_over_https() -> None:
    plain = cookie_options(Settings(console_url="http://127.0.0.1:8401", public_url="http://127.0.0.1:8400"))
    assert plain == {"same_site": "lax", "https_only": False}
    https = cookie_options(
        Settings(console_url="https://console.example", public_url="http://127.0.0.1:8400")
    )
    assert https == {"same_site": "lax", "https_only": True}
    api_https = cookie_options(Settings(public_url="https://cleanroom.example"))
    assert api_https["https_only"] is True


@pytest.fixture
def loose_umask() -> Iterator[None]:
    previous = os.umask(LOOSE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def test_prepare_makes_the_folder_private_and_removes_sessions_left_in_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loose_umask: None
) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    old = tmp_path / "checkout" / ".nicegui"
    old.mkdir(parents=True)
    (old / "storage-user-1.json").write_text('{"session": "a live API session"}')
    (old / "storage-general.json").write_text("{}")
    ours = storage.storage_path(settings)
    ours.mkdir(parents=True)
    (ours / "storage-user-2.json").write_text('{"session": "another"}')  # an older version's, 0644
    assert mode(ours / "storage-user-2.json") == 0o644  # positive control: the umask in force is 022
    monkeypatch.chdir(tmp_path / "checkout")
    monkeypatch.delenv("NICEGUI_STORAGE_PATH", raising=False)
    try:
        assert storage.prepare(settings) == ours
        assert os.umask(0o077) == 0o077  # prepare() left it at 077
        assert os.environ["NICEGUI_STORAGE_PATH"] == str(ours)
    finally:
        os.umask(LOOSE_UMASK)
    assert mode(ours) == 0o700 and mode(ours / "storage-user-2.json") == 0o600
    assert not old.exists()  # the sessions in the checkout are gone, and the emptied folder with them


def test_remove_legacy_leaves_other_files_and_the_storage_itself(tmp_path: Path) -> None:
    folder = tmp_path / ".nicegui"
    folder.mkdir()
    (folder / "storage-user-1.json").write_text("{}")
    (folder / "notes.txt").write_text("not NiceGUI's")
    assert storage.remove_legacy(folder, keep=folder) == 0  # the console's own storage is never removed
    assert storage.remove_legacy(folder, keep=tmp_path / "elsewhere") == 1
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_positive_control_nicegui_alone_writes_sessions_0644_under_umask_022(
    tmp_path: Path, loose_umask: None
) -> None:
    """What the review saw: NiceGUI's file storage, written under umask 022 with nobody choosing its place
    or modes, is readable by every local account."""
    from nicegui.persistence import FilePersistentDict

    stored = FilePersistentDict(tmp_path / ".nicegui" / "storage-user-x.json", encoding="utf-8")
    stored["session"] = "a live API session"  # no event loop: written at once
    assert mode(tmp_path / ".nicegui" / "storage-user-x.json") == 0o644
    assert mode(tmp_path / ".nicegui") == 0o755


@pytest.mark.slow
def test_a_loopback_caller_cannot_pick_its_counted_address_with_x_forwarded_for(served: Servers) -> None:
    """uvicorn believes X-Forwarded-For from loopback by default: any local account could have named a fresh
    address for each guess. `serve` believes it only from the proxies named in FORWARDED_ALLOW_IPS."""
    import sqlite3

    body = {"email": "nobody-xff@acme.example", "password": "guess"}
    headers = {"origin": served.console_url, "x-forwarded-for": "192.0.2.99"}
    assert (
        httpx.post(served.api_url + "/api/auth/login", json=body, headers=headers, timeout=30).status_code
        == 401
    )
    with sqlite3.connect(served.data_dir / "cleanroom.sqlite3") as db:
        rows = db.execute("SELECT ip FROM login_attempt WHERE email = ?", (body["email"],)).fetchall()
    assert rows == [("127.0.0.1",)]  # the TCP peer, not the header


def _umask_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError(f"no Umask line for {pid}")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


@pytest.mark.slow
def test_serve_and_the_processes_it_starts_run_with_umask_077(served: Servers) -> None:
    import subprocess

    plain = subprocess.Popen(["sleep", "30"], umask=LOOSE_UMASK)  # started as `serve` was
    try:
        assert _umask_of(plain.pid) == LOOSE_UMASK  # positive control: a process that sets none keeps 022
    finally:
        plain.kill()
        plain.wait()
    serve = served.processes[0]
    assert _umask_of(serve.pid) == 0o077
    children = _children(serve.pid)
    assert children  # the console (and the embedded worker, once the API is up)
    assert {pid: oct(_umask_of(pid)) for pid in children} == {pid: oct(0o077) for pid in children}
