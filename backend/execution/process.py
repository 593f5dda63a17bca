"""The run loop (`loop.RunLoop`) in a process of its own, `cleanroom worker --local`, supervised by
`cleanroom serve` (`LoopProcess`).

`serve` (SQLite, one machine) runs the API in one process and this worker loop in another, so a worker
crash does not take the API down (the supervisor starts a new worker, whose recovery ends the interrupted
run), and the API's end does not kill a running VM: a worker whose API is gone (its parent changed) or that
gets SIGTERM takes no new run, lets its running VMs finish, and exits. A new `serve` waits for such a
worker (its pid file) before it starts its own, so two workers never recover each other's runs. The API
wakes the worker with SIGUSR1 when it queues a run, so pickup does not wait for the poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from backend import filemodes
from backend.execution.loop import RunLoop
from backend.sandbox.libvirt_conn import owner_alive, owner_token
from backend.settings import REPO_ROOT, get_settings

log = logging.getLogger("cleanroom.loop")
PIDFILE = "worker.pid"


def pidfile() -> Path:
    return get_settings().data_dir / PIDFILE


def running_loop_process() -> int | None:
    """The pid of a live local worker of this data directory, or None."""
    try:
        token = pidfile().read_text().strip()
    except OSError:
        return None
    if not token or not owner_alive(token):
        return None
    return int(token.split(":", 1)[0])


def poke_loop_process() -> None:
    """SIGUSR1 to this data directory's live local worker, if one runs: an API process `serve` did not start
    the worker from (`serve --processes N`) wakes it on a queued run this way."""
    pid = running_loop_process()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGUSR1)


async def serve_local(poll_seconds: float = 0.5) -> None:
    """The worker loop until SIGTERM/SIGINT or until the API that started it is gone; then drain."""
    loop = asyncio.get_running_loop()
    worker = RunLoop(poll_seconds=poll_seconds)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, worker.wake)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = _parent()
    # before recovery: never beside another worker of this data directory; told to stop while it waits, or
    # its API gone, it ends without having done anything
    lock = await _hold_the_data_dir(lambda: stop.is_set() or os.getppid() != parent)
    if lock is None:
        log.info("local worker %d stopped before it began", os.getpid())
        return
    await worker.start()  # recovery first: runs left `running` by a crashed worker end as interrupted
    path = pidfile()
    filemodes.private_file(path).write_text(owner_token())
    log.info("local worker %d ready", os.getpid())
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            if os.getppid() != parent:
                log.warning("the API that started this worker is gone: finishing the running VMs")
                break
    finally:
        await worker.drain()
        with contextlib.suppress(OSError):
            if path.read_text().strip() == owner_token():
                path.unlink()
        os.close(lock)
        log.info("local worker %d stopped", os.getpid())


LOCKFILE = "worker.lock"


LOCK_POLL_SECONDS = 0.25


async def _hold_the_data_dir(give_up: Callable[[], bool] = lambda: False) -> int | None:
    """An exclusive lock on the data directory's worker lock, held until this process ends (the kernel lets
    go of it when the process dies, even by SIGKILL). A worker started while the previous one still lives
    (an API killed before that worker had written its pid file) waits here, before its recovery could end
    the other's running runs and before it takes a run the other may take too. The wait asks the lock again
    every LOCK_POLL_SECONDS rather than blocking in flock(), so that `give_up()` (SIGTERM, or the API that
    started this worker gone) ends it: None, the lock not taken. A worker blocked in flock() ignored both and
    outlived its API for as long as the other worker lived."""
    fd = os.open(get_settings().data_dir / LOCKFILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if not told:
                log.info("another worker of this data directory is still finishing its runs: waiting for it")
                told = True
        if give_up():
            os.close(fd)
            return None
        await asyncio.sleep(LOCK_POLL_SECONDS)


PARENT_ENV = "CLEANROOM_WORKER_PARENT"


def _parent() -> int:
    """The `serve` that started this worker: named in the environment, because a parent killed while this
    process was still importing has already been replaced by init when it could first ask getppid() (the
    worker then took init for its API and never ended)."""
    named = os.environ.get(PARENT_ENV, "")
    return int(named) if named.isdigit() else os.getppid()


class LoopProcess:
    """In `serve`: starts the local worker process, starts a new one when it dies, wakes it on a queued run."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._supervise, name="cleanroom-local-worker", daemon=True)
        self._thread.start()

    def _api_up(self) -> bool:
        """The API answers (it has brought the database to its schema; the worker may start)."""
        import urllib.request

        settings = get_settings()
        host = settings.host if settings.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        url = f"http://{host}:{settings.api_port}/api/health"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own localhost API
                return response.status == 200
        except OSError:
            return False

    def _supervise(self) -> None:
        while not self._stop.is_set() and not self._api_up():
            self._stop.wait(0.2)
        backoff = 1.0
        while not self._stop.is_set():
            other = running_loop_process()
            if other is not None and (self.proc is None or other != self.proc.pid):
                log.info("waiting for the previous worker %d to finish its runs", other)
                self._stop.wait(1.0)
                continue
            began = time.monotonic()
            env = {**(self.env if self.env is not None else os.environ), PARENT_ENV: str(os.getpid())}
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "backend", "worker", "--local"], env=env, cwd=REPO_ROOT
            )
            code = self.proc.wait()
            if self._stop.is_set():
                return
            log.error("the local worker exited with %s; starting a new one", code)
            backoff = 1.0 if time.monotonic() - began > 60 else min(backoff * 2, 30.0)
            self._stop.wait(backoff)

    def poke(self) -> None:
        """SIGUSR1 to the worker once it is ready (its pid file names it: the handler is installed)."""
        proc = self.proc
        if proc is not None and proc.poll() is None and running_loop_process() == proc.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGUSR1)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM: the worker takes nothing new and exits once its running VMs finished."""
        self._stop.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
