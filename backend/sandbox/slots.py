"""Saved-state slots: one warm saved guest per slot, and which slots are in use.

Restore keeps the saved domain's name and UUID, so each slot has its own saved state (made by
`templates.prepare_saved_states`) and serves one run at a time: its domain is always
`cleanroom-run-slot<N>-<image8>`. A slot is held with an flock, so neither threads nor other
processes ever share one. Its guest's QEMU runs as the slot's own uid/gid (`filemodes.guest_identity`: a
named fleet host's in a block of its own), part of the configuration its saved state was made for. The slot
lock is per host and image, a uid is the machine's: so holding a slot also takes its uid's machine-wide
lock (`filemodes.take_guest_ids`), and a uid another guest holds (another image's slot, another host id
hashed alike, another slot count's cold-boot id) leaves the slot to the next acquire. That uid serves one
tenant after another, so no process of it outlives its holder: releasing a slot SIGKILLs whatever still
runs as its uid and returns once none is alive, and taking a uid whose last holder did not release it (it
died) sweeps first (`filemodes.claim_guest_ids`/`free_guest_ids`, marked in the uid's lock file); a slot
whose uid keeps a survivor is not handed out.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import libvirt

from backend import filemodes
from backend.hashing import sha256_bytes, sha256_json
from backend.sandbox.domain import (
    KERNEL_CMDLINE,
    TEMPLATE_PATH,
    guest_memory_mib,
    guest_vcpus,
    host_prefix,
    job_disk_bytes,
    output_disk_bytes,
)
from backend.sandbox.image import ImageInfo
from backend.settings import get_settings

log = logging.getLogger("cleanroom.sandbox")


def states_dir(image: ImageInfo) -> Path:
    """Where this host keeps its saved states and slot locks: each fleet worker (settings `host_id`) its own."""
    host = get_settings().host_id
    return image.directory / "states" / host if host else image.directory / "states"


@dataclass(frozen=True)
class Slot:
    index: int
    image: ImageInfo
    virt_type: str

    @property
    def directory(self) -> Path:
        return states_dir(self.image)

    @property
    def name(self) -> str:
        return f"{host_prefix()}slot{self.index}-{self.image.image_hash[:8]}"

    @property
    def state_path(self) -> Path:
        return self.directory / f"{self.virt_type}-slot{self.index}.save"

    @property
    def meta_path(self) -> Path:
        return self.directory / f"{self.virt_type}-slot{self.index}.json"

    @property
    def guest_ids(self) -> tuple[int, int] | None:
        """The uid/gid this slot's QEMU runs as (None: libvirt's default user, under a session libvirt)."""
        return filemodes.guest_identity(self.index)

    def config_hash(self) -> str:
        return sha256_json(
            {
                "image": self.image.image_hash,
                "virt_type": self.virt_type,
                "memory_mib": guest_memory_mib(),
                "vcpus": guest_vcpus(self.virt_type),
                "job_disk": job_disk_bytes(),
                "output_disk": output_disk_bytes(),
                "template": sha256_bytes(TEMPLATE_PATH.read_bytes()),
                "cmdline": KERNEL_CMDLINE,
                "libvirt": libvirt.getVersion(),
                "guest_ids": self.guest_ids,  # states from before per-slot uids (or another base) retire
            }
        )

    def saved_uuid(self) -> str | None:
        """The UUID of a usable saved state, or None when missing or made for another configuration."""
        try:
            meta = json.loads(self.meta_path.read_text())
        except (OSError, ValueError):
            return None
        if meta.get("config_hash") != self.config_hash() or not self.state_path.is_file():
            return None
        return meta.get("uuid")

    def discard(self) -> None:
        for path in (self.meta_path, self.state_path):
            path.unlink(missing_ok=True)


def all_slots(image: ImageInfo, virt_type: str) -> list[Slot]:
    return [Slot(index, image, virt_type) for index in range(get_settings().saved_state_slots)]


class SlotPool:
    """Which slots are in use: an flock per slot, so threads and other processes never share one, and the
    machine-wide flock of its guest uid, so no other guest on this machine runs as it meanwhile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[str, int], tuple[int, filemodes.GuestIdLease | None]] = {}
        self._next = 0

    def _try_lock(self, slot: Slot) -> bool:
        key = (slot.image.image_hash, slot.index)
        with self._lock:
            if key in self._held:
                return False
            slot.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(slot.directory / f"slot{slot.index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            ids = slot.guest_ids
            lease = None
            if ids is not None:
                # swept on taking (nothing of an earlier tenant runs on it); None: another guest holds it
                lease = filemodes.take_guest_ids(ids)
                if lease is None:
                    log.info("slot %s waits: its guest uid %s is held or not clean", slot.index, ids[0])
                    os.close(fd)
                    return False
            self._held[key] = (fd, lease)
            return True

    def acquire(self, image: ImageInfo, virt_type: str) -> tuple[Slot, str] | None:
        """A free slot with a usable saved state, and that state's UUID; None when there is none."""
        # Round-robin: libvirt finishes forgetting the last killed domain while the next slot runs.
        count = get_settings().saved_state_slots
        with self._lock:
            first = self._next
        for offset in range(count):
            index = (first + offset) % count
            slot = Slot(index, image, virt_type)
            if not slot.saved_uuid() or not self._try_lock(slot):
                continue
            saved_uuid = slot.saved_uuid()  # re-read under the lock
            if saved_uuid:
                with self._lock:
                    self._next = (index + 1) % count
                return slot, saved_uuid
            self.release(slot)
        return None

    def hold(self, slot: Slot) -> bool:
        return self._try_lock(slot)

    def release(self, slot: Slot) -> None:
        """Free a slot once its guest is gone: no process of its uid is left alive when this returns normally
        (a survivor leaves the lock unmarked and logged: the next holder sweeps again or passes it by)."""
        with self._lock:
            held = self._held.pop((slot.image.image_hash, slot.index), None)
        if held is None:
            return
        fd, lease = held
        try:
            if lease is not None:
                lease.release()  # sweeps its uid; a survivor leaves it unmarked (logged), the uid lock dropped
        finally:
            os.close(fd)  # closing drops the slot's flock


slot_pool = SlotPool()
