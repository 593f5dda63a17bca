"""The sandbox: every run is one fresh QEMU/KVM guest with no network interface.

Other code calls only these:

- `run_code(code, *, input_dir, out_dir, limits=None, read_actions=True) -> SandboxResult`
  synchronous and thread-safe (call it from worker threads, up to `max_concurrent_vms`).
  Accepted output files land in `out_dir` (flat names); `actions.json` is never among them:
  it comes back parsed in `result.actions` (None and a `rejected_files` reason when malformed
  or over `actions_cap()`), or, with `read_actions=False`, unread (`actions_discarded=True`).
- `RunLimits(wall_seconds=120, memory_mib=2048, vcpus=2)`: a caller may lower them; the
  operator caps in settings always win.
- `SandboxResult`: the `cleanroom sandbox exec --json` object (status is one of succeeded,
  failed, timed_out, out_of_memory, error; `error` says what went wrong on our side).
- `recover_leftovers()`: at service start, destroys leftover `cleanroom-run-*` domains and
  deletes per-run files; returns what it removed.
- `health()`: virt type in use, image hash/path, saved states ready, running VM count.
- `start_standby_pool()` / `stop_standby_pool()`: optional, for long-lived services (call after
  `recover_leftovers()`): keeps `standby_vms` guests restored ahead of requests, each used for
  exactly one run, so a run skips the restore (~0.5-1 s under TCG). Stopped at exit.
- `ensure_image(force=False, progress=print)` and `prepare_saved_states(progress=print)`:
  what `cleanroom image build` does.
- `actions_cap()`, `cap_stream()`: the actions and printed-output policies (backend.sandbox.output).

Inside: `vm.GuestVM` owns one guest from restore/boot to kill; `runner` chooses standby, slot or
cold boot; `slots`, `templates` (warm saved states), `standby`, `output`, `recovery`, `virt`,
`status`, `wire` (the disk protocol), `domain` (the one domain XML). Only this package talks to libvirt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend import lazy

# Loaded on first use (backend/lazy.py): importing a light submodule such as `backend.sandbox.models` (the API's
# schemas and the typed client do) must not pull in libvirt, the image builder or the standby pool with it.
_LAZY = {
    "ImageInfo": "image",
    "current_image": "image",
    "ensure_image": "image",
    "RunLimits": "models",
    "SandboxResult": "models",
    "actions_cap": "output",
    "cap_stream": "output",
    "recover_leftovers": "recovery",
    "run_code": "runner",
    "start_standby_pool": "standby",
    "stop_standby_pool": "standby",
    "health": "status",
    "prepare_saved_states": "templates",
}

if TYPE_CHECKING:
    from backend.sandbox.image import ImageInfo, current_image, ensure_image
    from backend.sandbox.models import RunLimits, SandboxResult
    from backend.sandbox.output import actions_cap, cap_stream
    from backend.sandbox.recovery import recover_leftovers
    from backend.sandbox.runner import run_code
    from backend.sandbox.standby import start_standby_pool, stop_standby_pool
    from backend.sandbox.status import health
    from backend.sandbox.templates import prepare_saved_states


__getattr__ = lazy.exports(__name__, _LAZY)

__all__ = [
    "ImageInfo",
    "RunLimits",
    "SandboxResult",
    "actions_cap",
    "cap_stream",
    "current_image",
    "ensure_image",
    "health",
    "prepare_saved_states",
    "recover_leftovers",
    "run_code",
    "start_standby_pool",
    "stop_standby_pool",
]
