"""The standby pool: guests restored ahead of any request, each idling until it gets exactly one job.

Each standby is a fresh restore of a pristine saved state with its own per-run disks, so freshness
is unchanged; only the restore moves off the request path. Off unless a long-lived service calls
`start_standby_pool()` (today only `cleanroom bench sandbox` and the VM tests do).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from backend.sandbox.image import ImageInfo, current_image
from backend.sandbox.slots import slot_pool
from backend.sandbox.virt import resolve_virt_type
from backend.sandbox.vm import GuestVM
from backend.settings import get_settings


class StandbyPool:
    """Keeps `want` restored guests waiting; refills between runs (a restore next to a run slows it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: list[GuestVM] = []
        self._want = 0
        self._thread: threading.Thread | None = None
        self._registered = False
        self._active_runs = 0

    @contextmanager
    def run(self) -> Iterator[None]:
        """Marks a run in progress, so the pool waits with its refill until the host is quieter."""
        with self._cond:
            self._active_runs += 1
        try:
            yield
        finally:
            with self._cond:
                self._active_runs -= 1
                self._cond.notify_all()

    @property
    def active(self) -> bool:
        return self._want > 0

    def start(self, count: int | None = None) -> None:
        with self._cond:
            self._want = get_settings().standby_vms if count is None else count
            if self._want > 0 and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._loop, name="cleanroom-standby", daemon=True)
                self._thread.start()
            if not self._registered:
                atexit.register(self.stop)
                self._registered = True
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._want = 0
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout=60)
        with self._cond:
            leftovers, self._ready = self._ready, []
        for vm in leftovers:
            vm.kill()

    def take(self, image: ImageInfo, virt_type: str) -> GuestVM | None:
        if not self.active:
            return None
        with self._cond:
            for vm in self._ready:
                if vm.image.image_hash == image.image_hash and vm.virt_type == virt_type:
                    self._ready.remove(vm)
                    self._cond.notify_all()
                    vm.standby = True
                    return vm
        return None

    def size(self) -> int:
        with self._cond:
            return len(self._ready)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._want > 0 and (
                    len(self._ready) >= self._want or (self._active_runs > 0 and self._ready)
                ):
                    self._cond.wait(timeout=1.0)
                if self._want <= 0:
                    return
            try:
                vm = self._restore_one()
            except Exception:  # noqa: BLE001 - a failed standby just means on-demand restores
                vm = None
            if vm is None:
                time.sleep(0.5)
                continue
            with self._cond:
                if self._want > len(self._ready):
                    self._ready.append(vm)
                    vm = None
            if vm is not None:
                vm.kill()

    def _restore_one(self) -> GuestVM | None:
        image = current_image()
        if image is None or not get_settings().use_saved_state:
            return None
        virt_type = resolve_virt_type(image)
        acquired = slot_pool.acquire(image, virt_type)
        if acquired is None:
            return None
        slot, saved_uuid = acquired
        vm = GuestVM(image, virt_type, slot=slot, uuid=saved_uuid)
        try:
            vm.prepare()
            vm.restore()
        except BaseException:
            vm.kill()
            raise
        return vm


standby_pool = StandbyPool()


def start_standby_pool(count: int | None = None) -> None:
    """Keep `count` (default: setting `standby_vms`) restored guests ready; for long-lived services."""
    standby_pool.start(count)


def stop_standby_pool() -> None:
    standby_pool.stop()


def standby_ready() -> int:
    return standby_pool.size()
