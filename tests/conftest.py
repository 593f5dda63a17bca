"""Shared fixtures: a fresh real database per test (SQLite file, or a PostgreSQL database cloned from a
seeded template), the demo company, and an HTTP client against the real app."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import inspect
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

# Each test process has a data directory of its own: pytest-xdist's workers inherit the environment of the
# process that started them, so a directory this file chose in another process is replaced, one given from
# outside kept, and this process's own kept when the file is imported a second time (as `conftest` by pytest
# and as `tests.conftest` by a test's import: a new directory then would hide the seeded blobs). It is removed
# when the process ends.
_chosen_by = os.environ.get("CLEANROOM_TEST_OWN_DATA_DIR")
if "CLEANROOM_DATA_DIR" not in os.environ or (_chosen_by is not None and _chosen_by != str(os.getpid())):
    _data = tempfile.mkdtemp(prefix=f"cleanroom-test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-")
    os.environ["CLEANROOM_DATA_DIR"] = _data
    os.environ["CLEANROOM_TEST_OWN_DATA_DIR"] = str(os.getpid())
    atexit.register(shutil.rmtree, _data, ignore_errors=True)
# One directory per run for what the run's processes share (the database templates, tests/README.md): chosen by
# the process that starts the run (pytest-xdist's controller, or the one process of `-n 0`), which the workers
# inherit it from; it goes when that process ends. Imported a second time in that process (as `tests.conftest`,
# by a folder's conftest), the file keeps the directory it made the first time.
if os.environ.get("PYTEST_XDIST_WORKER") is None and os.environ.get("CLEANROOM_TEST_RUN_PID") != str(
    os.getpid()
):
    _run_dir = tempfile.mkdtemp(prefix="cleanroom-test-run-")
    os.environ["CLEANROOM_TEST_RUN_DIR"] = _run_dir
    os.environ["CLEANROOM_TEST_RUN_PID"] = str(os.getpid())
    atexit.register(shutil.rmtree, _run_dir, ignore_errors=True)
os.environ.setdefault("CLEANROOM_LOGIN_ATTEMPTS_PER_WINDOW", "5")
# no standby guests behind the services tests start (a subprocess inherits this); tests/execution/test_standby_service.py
# turns them on where they are the subject
os.environ.setdefault("CLEANROOM_STANDBY_IN_SERVICE", "off")
# the Host names the in-process test clients use (Litestar's and the console tests' ASGI transport)
os.environ.setdefault("CLEANROOM_ALLOWED_HOSTS", '["testserver.local", "api.test"]')
# passwords hashed in tests (set by a link, changed, rehashed at sign-in) use argon2's cheapest profile, the
# demo template's: production's is tests/tenancy/test_password_hashing.py's subject (backend/tenancy/passwords.py)
os.environ.setdefault("CLEANROOM_PASSWORD_HASH_PROFILE", "cheap")

from backend import db  # noqa: E402
from backend.settings import get_settings  # noqa: E402
from tests.support.databases import (  # noqa: E402
    CHEAP_HASHER,
    POSTGRES_URL,
    _admin_sql,
    _blocking,
    _owner,
    _shared_app,
    _sweep_leftover_databases,
    _with_db,
)
from tests.support.http import console_origin  # noqa: E402

get_settings.cache_clear()
ENGINES = ["sqlite", "postgres"]


RUN_DIR = Path(os.environ["CLEANROOM_TEST_RUN_DIR"])
RUN_PID = int(os.environ["CLEANROOM_TEST_RUN_PID"])


@contextlib.contextmanager
def _run_lock(name: str) -> Iterator[None]:
    """Held by one process of the run at a time (the run's processes build a template once between them)."""
    import fcntl

    with open(RUN_DIR / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class EngineFactory:
    """Makes fresh databases for one engine; empty or seeded with the demo companies.

    PostgreSQL's are cloned from a template (CREATE DATABASE … TEMPLATE, ~0.5 s each): a thread makes the
    next one while the current test runs and drops the finished ones behind it, so a test waits for neither.

    The templates are the run's: the first process to need one builds it (the seed: 3-5 s, four templates)
    while the others wait for it, and takes a copy of the Drive blobs the seed wrote into its data directory;
    the others copy those into theirs. They are named by the process that started the run, which drops the
    PostgreSQL ones when it ends (`pytest_unconfigure`; a killed run's are swept as before).
    """

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        self._templates: dict[str, str] = {}
        self._owner = _owner()
        self._background = ThreadPoolExecutor(1, thread_name_prefix=f"{kind}-databases")
        self._ahead: dict[str, Future[str]] = {}
        if kind == "postgres" and POSTGRES_URL:
            self._background.submit(_sweep_leftover_databases)

    def _build_template(self, seeded: bool) -> str:
        from backend.demo.seed import seed

        name = f"tpl_{'seeded' if seeded else 'empty'}_{_owner(RUN_PID)}_{uuid.uuid4().hex[:8]}"
        if self.kind == "sqlite":
            url = f"sqlite:///{RUN_DIR / (name + '.sqlite3')}"
        else:
            _blocking(lambda: _admin_sql(f'CREATE DATABASE "{name}"'))
            url = _with_db(POSTGRES_URL, name)

        async def build() -> None:
            db.configure(url)
            await db.start_pool()  # PostgreSQL: one pool for the seed's queries, not a connection for each
            try:
                if seeded:
                    await seed()
                else:
                    await db.create_schema()
            finally:
                await db.close_pool()

        # the demo people's password hashes use argon2's cheapest profile here: every sign-in of every test
        # verifies one, and verifying costs what the hash's own parameters say. Production hashing is
        # unchanged (tests/tenancy/test_password_hashing.py checks its parameters).
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("backend.demo.seed.hash_password", CHEAP_HASHER.hash)
            _blocking(build)
        return name

    def _clone(self, template: str) -> str:
        name = f"t_{self._owner}_{uuid.uuid4().hex[:12]}"
        _blocking(lambda: _admin_sql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
        return name

    def template(self, seeded: bool) -> str:
        """The run's template database (built by the first process to need it): the demo companies, or the
        schema alone; the blobs its seed wrote are copied into this process's data directory."""
        key = "seeded" if seeded else "empty"
        if key not in self._templates:
            made = RUN_DIR / f"{self.kind}-{key}.name"
            blobs = RUN_DIR / f"{self.kind}-{key}-blobs"
            mine = get_settings().data_dir / "blobs"
            with _run_lock(f"{self.kind}-{key}"):
                if made.exists():
                    name = made.read_text()
                    if blobs.is_dir():
                        shutil.copytree(blobs, mine, dirs_exist_ok=True)
                else:
                    name = self._build_template(seeded)
                    if seeded and mine.is_dir():  # the schema alone writes no blob
                        shutil.copytree(mine, blobs)
                    made.write_text(name)
            self._templates[key] = name
        return self._templates[key]

    def fresh(self, seeded: bool) -> str:
        key = "seeded" if seeded else "empty"
        template = self.template(seeded)
        if self.kind == "sqlite":
            name = f"t_{uuid.uuid4().hex[:12]}"
            shutil.copyfile(RUN_DIR / (template + ".sqlite3"), self.root / (name + ".sqlite3"))
            return f"sqlite:///{self.root / (name + '.sqlite3')}"
        ready = self._ahead.pop(key, None) or self._background.submit(self._clone, template)
        name = ready.result()
        self._ahead[key] = self._background.submit(self._clone, template)  # the next test's
        return _with_db(POSTGRES_URL, name)

    def drop(self, url: str) -> None:
        if self.kind == "sqlite":
            Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        else:
            name = url.rpartition("/")[2]
            self._background.submit(_admin_sql_blocking, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        """At the end of the session: the databases made ahead go (the templates, the run's, when the run ends)."""
        if self.kind == "postgres" and POSTGRES_URL:
            names = [f.result() for f in self._ahead.values() if f.exception() is None]
            for name in names:
                self._background.submit(_admin_sql_blocking, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._background.shutdown(wait=True)


def _admin_sql_blocking(sql: str) -> None:
    _blocking(lambda: _admin_sql(sql))


def pytest_unconfigure(config: pytest.Config) -> None:
    """The process that started the run drops the run's PostgreSQL templates (named by it) once every test has
    ended."""
    if os.getpid() != RUN_PID or not POSTGRES_URL:
        return
    ours = re.compile(rf"^tpl_(?:seeded|empty)_{_owner(RUN_PID)}_[0-9a-f]+$")
    (rows,) = _blocking(lambda: _admin_sql("SELECT datname FROM pg_database"))
    for name in (r["datname"] for r in rows if ours.match(r["datname"])):
        _admin_sql_blocking(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def _factories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EngineFactory]]:
    root = tmp_path_factory.mktemp("db")
    factories = {kind: EngineFactory(kind, root) for kind in ENGINES}
    yield factories
    for factory in factories.values():
        factory.close()


# A hang fails one test with pytest-timeout's message (the stack of every thread) instead of eating the run:
# generous for what boots real VMs under emulation or drives a browser, tight for the rest. scripts/test
# also bounds the whole run.
HEAVY_MARKS = frozenset({"vm", "browser", "slow"})
HEAVY_TIMEOUT_SECONDS = 900
TIMEOUT_SECONDS = 300


# With pytest-xdist (scripts/test runs two processes), what must not share the machine runs in one serial group
# on one process: real VMs, the browser, fleet workers, services started as processes, and what counts domains,
# kills a uid's processes or measures memory. Everything else spreads over both processes (each has its own
# data directory, databases and ports). The group is chosen by path: the scheduler sees only test ids, and
# under pytest 9.2 xdist's own `xdist_group` marks never reach it (xdist renames `item._nodeid`, which pytest
# no longer reads). Collection fails for a test marked `vm` or `browser` outside these paths, so a new one
# cannot slip into the parallel part.
SERIAL_GROUP = "machine"
SERIAL_PATHS = (
    # real VMs (marked `vm` in their files; tests/sandbox/conftest.py checks nothing is left behind)
    "tests/sandbox/test_guest_syscalls.py",
    "tests/sandbox/test_isolation.py",
    "tests/sandbox/test_sandbox_runs.py",
    "tests/sandbox/test_slot_uids.py",
    "tests/sandbox/test_guest_stack.py",  # the guest's Python stack (issue 57)
    "tests/fleet/test_workers.py",  # real fleet hosts running real VMs (the other fleet files replace the VM)
    "tests/console/test_browser",  # test_browser.py, _flows, _findings, _phone, _review
    "tests/console/test_console_storage.py",  # serve under a umask, a real browser
    "tests/flows/test_flows_vm.py",
    "tests/runs/test_runs_vm.py",
    "tests/runs/test_rerun_vm.py",
    "tests/execution/test_standby_service.py",
    "tests/execution/test_local_worker.py",
    "tests/soak/test_short_soak.py",  # serve killed and restarted, real VMs, a tmpfs mounted
    "tests/mcp/test_mcp_runs_vm.py",
    "tests/mcp/test_mcp_flows_vm.py",
    "tests/drive/test_zip_bomb_upload.py",  # peak memory
    "tests/sandbox/test_guest_uid_sweep.py",  # kills every process of a uid
    "tests/api/test_file_modes.py",  # starts the service
    "tests/convert/test_converter_output.py",  # converters streaming for seconds on purpose
)


def machine_bound(nodeid: str) -> bool:
    return nodeid.startswith(SERIAL_PATHS)


@pytest.hookimpl(optionalhook=True)  # `-p no:xdist` runs without the plugin and its hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's group scheduling with the serial group decided by `machine_bound`: the group goes to one
    process as a whole; every other test is a unit of its own."""
    from xdist.scheduler import LoadGroupScheduling

    class MachineGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SERIAL_GROUP if machine_bound(nodeid) else nodeid

    return MachineGroupScheduling(config, log)


class _GroupClock:
    """Where a run's time went, by group: the test time of the serial group and of the rest, and when each
    process reported its last test (the run's tail). Printed at the end of every run (tests/README.md)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.seconds = {"serial group": 0.0, "spread": 0.0}
        self.tests = {"serial group": 0, "spread": 0}
        self.last = {}  # process -> seconds since the start at its last report

    def add(self, report: pytest.TestReport) -> None:
        group = "serial group" if machine_bound(report.nodeid) else "spread"
        self.seconds[group] += report.duration
        if report.when == "call":
            self.tests[group] += 1
        node = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
        self.last[node] = time.monotonic() - self.started

    def lines(self) -> list[str]:
        out = [
            f"{group}: {self.tests[group]} tests, {self.seconds[group] / 60:.1f} min of test time"
            for group in self.seconds
        ]
        out += [
            f"{node} reported its last test at {at / 60:.1f} min" for node, at in sorted(self.last.items())
        ]
        return out


_CLOCK = _GroupClock()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the process that sees every test's report
        _CLOCK.add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None and _CLOCK.last:
        terminalreporter.write_sep("=", "time by group")
        for line in _CLOCK.lines():
            terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)  # after the folders' own hooks have marked their tests
def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        if any(item.get_closest_marker(mark) for mark in ("vm", "browser")) and not machine_bound(
            item.nodeid
        ):
            raise pytest.UsageError(
                f"{item.nodeid} uses real VMs or the browser but is outside SERIAL_PATHS (tests/conftest.py): "
                "add its file there so that it runs in the serial group"
            )
        if item.get_closest_marker("timeout") is not None:
            continue  # a test that says its own ceiling keeps it
        heavy = any(item.get_closest_marker(mark) for mark in HEAVY_MARKS)
        item.add_marker(pytest.mark.timeout(HEAVY_TIMEOUT_SECONDS if heavy else TIMEOUT_SECONDS))
    # Every module the tests use is imported now: move what exists into the collector's permanent generation,
    # so that a full collection (NiceGUI's simulated user runs two per test) walks only what tests create.
    gc.collect()
    gc.freeze()


TASK_DUMP_LEAD_SECONDS = 20


def _dump_asyncio_tasks(test: str) -> None:
    """pytest-timeout shows every thread's stack, but an async test stuck in an `await` shows only its event
    loop idling in select(): print what each task of each running loop awaits, from inside that loop."""

    def dump() -> None:
        print(
            f"--- asyncio tasks of {test}, {TASK_DUMP_LEAD_SECONDS} s before its timeout ---", file=sys.stderr
        )
        for task in asyncio.all_tasks():
            task.print_stack(limit=12, file=sys.stderr)

    for obj in gc.get_objects():
        if isinstance(obj, asyncio.AbstractEventLoop) and obj.is_running():
            with contextlib.suppress(RuntimeError):
                obj.call_soon_threadsafe(dump)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    marker = item.get_closest_marker("timeout")
    seconds = float(marker.args[0]) if marker is not None and marker.args else 0.0
    timer = None
    if seconds > TASK_DUMP_LEAD_SECONDS:
        timer = threading.Timer(seconds - TASK_DUMP_LEAD_SECONDS, _dump_asyncio_tasks, (item.nodeid,))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" in metafunc.fixturenames:
        marks = {m.name for m in metafunc.definition.iter_markers()}
        engines = [e for e in ENGINES if not (marks & set(ENGINES)) or e in marks]
        metafunc.parametrize("engine", engines, indirect=True)


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> str:
    kind = getattr(request, "param", "sqlite")
    if kind == "postgres" and not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (scripts/test sets CLEANROOM_TEST_POSTGRES_URL)")
    return kind


def _database(factories: dict[str, EngineFactory], engine: str, seeded: bool) -> Iterator[str]:
    factory = factories[engine]
    url = factory.fresh(seeded)
    db.configure(url)
    yield url
    factory.drop(url)


@pytest.fixture
def empty_db(_factories: dict[str, EngineFactory], engine: str) -> Iterator[str]:
    """A fresh database with the schema and no data."""
    yield from _database(_factories, engine, seeded=False)


@pytest.fixture
def demo_db(_factories: dict[str, EngineFactory], engine: str) -> Iterator[str]:
    """A fresh database holding the demo companies."""
    yield from _database(_factories, engine, seeded=True)


DATABASE_FIXTURES = ("demo_db", "empty_db")


@pytest.fixture(autouse=True)
async def _postgres_pool(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """An async test on PostgreSQL queries through a connection pool in its own event loop, as the service
    does in its (without one, Piccolo opens a connection per query: ~10 ms of authentication and a new
    server process each, 100 times the query). The app under test has its own pool in its own loop
    (`db.LoopPostgresEngine`). Sync tests and SQLite are untouched."""
    used = [name for name in DATABASE_FIXTURES if name in request.fixturenames]
    if not used or not inspect.iscoroutinefunction(request.function):
        yield
        return
    request.getfixturevalue(used[0])  # configured first, dropped after the pool is closed
    if not db.is_postgres():
        yield
        return
    engine = db.engine()
    await db.start_pool()
    try:
        yield
    finally:
        if engine.pool is not None:
            await engine.close_connection_pool()


@pytest.fixture
async def client(demo_db: str) -> AsyncIterator[object]:
    from litestar.testing import AsyncTestClient

    # its requests run in the test client's own event loop, through the app's pool there (db.LoopPostgresEngine);
    # the test's own queries, in the test's loop, connect per query
    app = _shared_app(demo_db)
    async with AsyncTestClient(app=app) as test_client:
        test_client.headers["origin"] = console_origin()  # as the console sends it (the CSRF rule)
        yield test_client


# The demo people most tests act as, shared by every folder (they were the runs' fixtures, imported by other
# folders' conftests and files)
@pytest.fixture
async def alice(client) -> dict[str, str]:
    """alice's assistant: the headers of a fresh personal token of hers."""
    from tests.support.http import token_for

    return await token_for(client, "alice@acme.example")


@pytest.fixture
async def alice_person(client, alice) -> dict[str, str]:
    """alice herself, signed in with a session cookie (after her assistant's token was minted): a person's
    requests carry no token, so the headers to send are none."""
    from tests.support.http import login

    await login(client, "alice@acme.example")
    return {}


@pytest.fixture
async def acme_on(demo_db: str) -> None:
    """Acme Analytics with code execution on (the company switch ships off)."""
    from tests.support.runs import enable_code

    await enable_code()
