"""The standby pool: guests restored ahead of any request, each idling until it gets exactly one job.

Each standby is a fresh restore of a pristine saved state with its own per-run disks, so freshness
is unchanged; only the restore moves off the request path. It waits paused (its vCPUs stopped: no CPU
spent while no job comes) and is resumed once its job is on its disk. A guest is handed out once and never
comes back; a guest restored for another image or another configuration (memory, vCPUs, disks) is
retired instead of handed out. The service's worker starts the pool when `service_standby_count()`
says so (setting `standby_in_service`); `cleanroom bench sandbox` starts its own.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.sandbox import libvirt_conn
from backend.sandbox.domain import guest_memory_mib
from backend.sandbox.image import ImageInfo, current_image
from backend.sandbox.slots import slot_pool
from backend.sandbox.virt import resolve_virt_type
from backend.sandbox.vm import GuestVM
from backend.settings import get_settings

# After a run ends, a refill waits this long while a guest still waits: the next run often follows at once
# (a flow's next step, a queue being worked off) and a restore beside its start would slow it.
REFILL_SETTLE_SECONDS = 1.0
# How long a restored standby guest runs (polling its empty job disk) before it is paused to wait.
STANDBY_WARM_SECONDS = 1.5


class StandbyPool:
    """Keeps `want` restored guests waiting; refills between runs (a restore next to a run slows it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: list[GuestVM] = []
        self._want = 0
        self._thread: threading.Thread | None = None
        self._registered = False
        self._active_runs = 0
        self._last_run_end = 0.0  # monotonic

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
                self._last_run_end = time.monotonic()
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
            _retire(vm)

    def take(self, image: ImageInfo, virt_type: str, started_after: float | None = None) -> GuestVM | None:
        """A waiting guest for this image, handed out once; stale guests are retired on the way.
        `started_after`: only a guest whose QEMU began after that moment (a flow's next step takes no VM
        that existed while its previous step's VM did)."""
        if not self.active:
            return None
        chosen: GuestVM | None = None
        with self._cond:
            stale = [vm for vm in self._ready if not _current(vm, image, virt_type)]
            for vm in stale:
                self._ready.remove(vm)
            fresh = [vm for vm in self._ready if started_after is None or vm.started_unix > started_after]
            if fresh:
                chosen = fresh[0]
                self._ready.remove(chosen)
                chosen.standby = True
            self._cond.notify_all()
        for vm in stale:  # on the request path: libvirt forgets it a moment later, and stop() waits
            vm.kill()
        return chosen

    def waiting(self) -> list[GuestVM]:
        """The guests waiting now (for measuring them; `take` is how a run gets one)."""
        with self._cond:
            return list(self._ready)

    def size(self) -> int:
        with self._cond:
            return len(self._ready)

    def _busy(self) -> float | None:
        """How long the refill should wait now (None: go). While a guest still waits, it does not restore
        beside a run or within REFILL_SETTLE_SECONDS of one ending; with none waiting it refills at once."""
        if len(self._ready) >= self._want:
            return 1.0
        if not self._ready:
            return None
        if self._active_runs > 0:
            return 1.0
        settle = REFILL_SETTLE_SECONDS - (time.monotonic() - self._last_run_end)
        return settle if settle > 0 else None

    def _loop(self) -> None:
        while True:
            self._retire_stale()
            with self._cond:
                if self._want <= 0:
                    return
                if (pause := self._busy()) is not None:
                    self._cond.wait(timeout=min(1.0, pause))
                    continue
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
                _retire(vm)

    def _retire_stale(self) -> None:
        """Waiting guests of an older image or configuration go as soon as the pool sees it (within a
        second), not when a run next asks; the refill then restores current ones."""
        image = current_image()
        if image is None or not self._ready:
            return
        try:
            virt_type = resolve_virt_type(image)
        except Exception:  # noqa: BLE001 - cannot tell now; `take` checks again
            return
        with self._cond:
            stale = [vm for vm in self._ready if not _current(vm, image, virt_type)]
            for vm in stale:
                self._ready.remove(vm)
        for vm in stale:
            _retire(vm)

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
            # Let it run its poll loop for a moment first: under software emulation QEMU translates guest
            # code on first use, and a guest paused straight after the restore pays that on the request
            # path (measured: READY ~560 ms after the job, against ~250 ms with this warm-up). Then pause
            # it: it waits without running until its job is written (runner._start resumes it).
            time.sleep(STANDBY_WARM_SECONDS)
            vm.pause()
        except BaseException:
            vm.kill()
            raise
        vm.standby_config = slot.config_hash()
        return vm


def _retire(vm: GuestVM) -> None:
    """Kill a guest the pool will not hand out and return once libvirt has forgotten it, so a stopped
    pool has no domain left (the quick kill lets libvirt finish its bookkeeping a moment later)."""
    vm.kill()
    try:
        with libvirt_conn.connection() as conn:
            libvirt_conn.wait_name_free(conn, vm.name)
    except Exception:  # noqa: BLE001 - libvirt unreachable: nothing left to wait for here
        pass


def _current(vm: GuestVM, image: ImageInfo, virt_type: str) -> bool:
    """Restored from today's image and configuration: a new image or changed limits retire a guest."""
    if vm.image.image_hash != image.image_hash or vm.virt_type != virt_type or vm.slot is None:
        return False
    try:
        return vm.standby_config == vm.slot.config_hash()
    except Exception:  # noqa: BLE001 - cannot tell: do not hand it out
        return False


standby_pool = StandbyPool()


def service_standby_count() -> int:
    """How many standby guests a long-lived service keeps: `standby_vms` when `standby_in_service` is on;
    with `auto`, only when saved states are in use and the host's available memory holds them next to
    `max_concurrent_vms` running guests (each at its full memory size, as if every page were touched)."""
    settings = get_settings()
    if settings.standby_in_service == "off" or not settings.use_saved_state or settings.standby_vms <= 0:
        return 0
    if settings.standby_in_service == "on":
        return settings.standby_vms
    needed = (settings.standby_vms + settings.max_concurrent_vms) * guest_memory_mib()
    return settings.standby_vms if _available_mib() >= needed else 0


def _available_mib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def start_standby_pool(count: int | None = None) -> None:
    """Keep `count` (default: setting `standby_vms`) restored guests ready; for long-lived services."""
    standby_pool.start(count)


def stop_standby_pool() -> None:
    standby_pool.stop()


def standby_ready() -> int:
    return standby_pool.size()
