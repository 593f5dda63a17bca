"""Warm saved states: each slot's state comes from its own pristine template boot, never after a job.

A template guest boots, imports the data stack (numpy, pandas, matplotlib, scipy.stats, seaborn, scikit-learn's
linear models: the agent's warm(); statsmodels is left to the code that uses it), pre-forks the user process,
writes the WARM block and idles; it is saved at that point. `cleanroom image build` makes the missing ones.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from backend.sandbox import wire
from backend.sandbox.image import current_image
from backend.sandbox.libvirt_conn import destroy_quietly, wait_name_free
from backend.sandbox.slots import Slot, all_slots, slot_pool
from backend.sandbox.virt import resolve_virt_type
from backend.sandbox.vm import GuestVM
from backend.settings import get_settings

Progress = Callable[[str], None]


def make_template(slot: Slot, progress: Progress) -> None:
    """Boot a pristine guest, wait until it is warm, save it as the slot's state.

    The guest takes over the caller's hold on the slot and frees it when it is killed.
    """
    workdir = slot.directory / f"template-{slot.virt_type}-slot{slot.index}"
    started = time.monotonic()
    with GuestVM(slot.image, slot.virt_type, slot=slot, run_id="template", workdir=workdir) as vm:
        slot.directory.mkdir(parents=True, exist_ok=True)
        slot.directory.chmod(0o755)
        slot.discard()
        shutil.rmtree(workdir, ignore_errors=True)
        vm.prepare()
        destroy_quietly(vm.conn, vm.name)  # a stray of an earlier crash holding the slot's name
        wait_name_free(vm.conn, vm.name)
        vm.cold_boot()
        deadline = time.monotonic() + get_settings().template_boot_timeout_seconds
        while wire.read_block0(vm.out_disk, wire.WARM_MAGIC) is None:
            if time.monotonic() > deadline or not vm.is_active():
                raise RuntimeError(
                    f"template guest for slot {slot.index} never became warm "
                    f"({'stopped' if not vm.is_active() else 'still booting'} after "
                    f"{time.monotonic() - started:.0f} s; CLEANROOM_TEMPLATE_BOOT_TIMEOUT_SECONDS is "
                    f"{get_settings().template_boot_timeout_seconds})"
                )
            time.sleep(0.1)
        vm.save(slot.state_path)
        meta = {
            "uuid": vm.uuid,
            "name": vm.name,
            "config_hash": slot.config_hash(),
            "image_hash": slot.image.image_hash,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        slot.meta_path.write_text(json.dumps(meta) + "\n")
    size_mib = slot.state_path.stat().st_size / 1048576
    progress(
        f"saved warm state for slot {slot.index} in {time.monotonic() - started:.0f} s ({size_mib:.0f} MiB)"
    )


def prepare_saved_states(progress: Progress = print, *, force: bool = False) -> int:
    """Make the warm saved state of every slot that lacks a current one. Returns how many were made."""
    image = current_image()
    if image is None:
        raise RuntimeError("guest image not built: run `cleanroom image build`")
    virt_type = resolve_virt_type(image, progress=progress)
    todo = [
        slot
        for slot in all_slots(image, virt_type)
        if (force or not slot.saved_uuid()) and slot_pool.hold(slot)
    ]
    if not todo:
        progress("saved warm states up to date")
        return 0
    progress(f"booting {len(todo)} warm template guest(s) under {virt_type} to save their state …")

    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(make_template, slot, progress) for slot in todo]:
            future.result()
    return len(todo)
