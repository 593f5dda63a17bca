"""The file converters' seccomp filter: the kernel refuses the calls a hostile file's code would need to reach
the network or the kernel's larger attack surface, whatever user it runs as.

The converter child installs it last (`isolated.confine`), after dropping to the converter user and setting
no_new_privs; the filter then holds for PDF rendering (pdfium, in the child itself) and for everything the
child starts (tesseract), across exec, and cannot be removed. The program comes from the generator the guest
agent uses too (`backend/seccomp_filter.py`: the refused calls, namespace clones, clone3), with the converter's
own choices: socket() only for AF_UNIX, and an x32 call kills the process like any foreign calling convention.
"""

from __future__ import annotations

import os

from backend import seccomp_filter

SOCKET_FAMILIES = (seccomp_filter.AF_UNIX,)
X32 = "kill"


def build_filter() -> bytes:
    """The classic BPF program, as the kernel's array of `struct sock_filter`."""
    return seccomp_filter.pack(seccomp_filter.syscall_filter(x32=X32, socket_families=SOCKET_FAMILIES))


def install() -> None:
    """Apply the filter to this process for good (no_new_privs set first). The converter child is
    single-threaded when it gets here; a thread would mean something started early, so it is refused rather
    than relied on TSYNC. Any failure raises: the converter does not run unfiltered."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"the converter has {threads} threads; seccomp must be installed before any start")
    seccomp_filter.install(seccomp_filter.syscall_filter(x32=X32, socket_families=SOCKET_FAMILIES))
