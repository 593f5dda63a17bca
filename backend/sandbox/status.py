"""`health()`: what the console's health panel and `/api/system/health` show about the sandbox."""

from __future__ import annotations

from typing import Any

import libvirt

from backend.sandbox.image import current_image, manifest
from backend.sandbox.recovery import running_domains
from backend.sandbox.slots import all_slots
from backend.sandbox.standby import standby_ready
from backend.sandbox.virt import resolve_virt_type
from backend.settings import get_settings


def health() -> dict[str, Any]:
    """Virt type in use, image hash/path, saved states ready, running VM count."""
    image = current_image()
    info: dict[str, Any] = {
        "virt_type": None,
        "image": {"hash": image.image_hash, "path": str(image.directory)} if image else None,
        # the guest's python and package versions (the image's manifest.json); extras_current False: the
        # operator's extra packages changed and their image is not built (or was refused): this one serves
        "guest": {**manifest(image), "extras_current": image.extras_current if image else None},
        "saved_state": {"enabled": get_settings().use_saved_state, "slots": 0, "ready": 0},
        "running_vms": None,
    }
    try:
        info["running_vms"] = len(running_domains())
    except libvirt.libvirtError as exc:
        info["libvirt_error"] = str(exc)
    if image is not None:
        virt_type = resolve_virt_type(image)
        info["virt_type"] = virt_type
        slots = all_slots(image, virt_type)
        ready = sum(1 for slot in slots if slot.saved_uuid())
        info["saved_state"].update(slots=len(slots), ready=ready, standby_ready=standby_ready())
    return info
