"""A console that `cleanroom serve` started ends when `serve` is gone, however `serve` ended (a kill -9
included): it is never left serving on its port, signed-in sessions and all, with no API behind it."""

from __future__ import annotations

import os
import signal
import threading
import time

CHECK_SECONDS = 1.0


def leave_with_parent(parent: str | None) -> None:
    """Watch the process that started this one (its pid, as `serve` passes it); when this process is
    reparented, stop the way a SIGTERM does (NiceGUI's server shuts down cleanly). No-op without a pid."""
    if not parent:
        return
    expected = int(parent)
    if os.getppid() != expected:  # gone before the watch began
        os.kill(os.getpid(), signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(CHECK_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="console-parent-watch", daemon=True).start()
