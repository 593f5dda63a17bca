"""A seccomp filter for the file converters: the kernel refuses the calls a hostile file's code would need to
reach the network or the kernel's larger attack surface, whatever user it runs as.

The converter child installs it last (`worker.confine`), after dropping to the converter user and setting
no_new_privs; the filter then holds for PDF rendering (pdfium, in the child itself) and for everything the
child starts (tesseract), across exec, and cannot be removed. A hand-built classic BPF program keeps the
dependency list short (no libseccomp):

* a foreign architecture (32-bit `int 0x80` calls report i386) or an x32 call kills the process: the syscall
  numbers below are x86_64's and mean something else there, so anything else would be fail-open;
* socket() for any family but AF_UNIX, io_uring (its operations bypass seccomp), bpf, userfaultfd,
  perf_event_open, kexec, the key rings, every way to mount, unshare/setns, ptrace, another process's memory
  (process_vm_readv/writev), file handles (name_to_handle_at, open_by_handle_at: the "shocker" way to open any
  inode of a bound filesystem) and module loading fail with EPERM, so a library that tries simply sees an
  error;
* clone() asking for a new namespace fails with EPERM (another way to unshare); clone3() passes its flags in
  memory a filter cannot read, so it fails with ENOSYS and glibc falls back to clone().
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# <linux/audit.h>, <linux/seccomp.h>, <linux/filter.h>
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian)
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0_LOW = 0, 4, 16

AF_UNIX = 1
CLONE_NEW_ANY = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
NR_SOCKET, NR_CLONE, NR_CLONE3 = 41, 56, 435
DENIED = {  # x86_64 numbers (asm/unistd_64.h)
    "ptrace": 101,
    "pivot_root": 155,
    "mount": 165,
    "umount2": 166,
    "init_module": 175,
    "delete_module": 176,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,  # with open_by_handle_at: any inode of a filesystem by a guessed handle
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,  # another process's memory
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,  # the new mount API
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    """One `struct sock_filter` {u16 code; u8 jt; u8 jf; u32 k}; jumps count instructions after this one."""
    return struct.pack("=HBBI", code, jt, jf, k)


def _ret(action: int) -> bytes:
    return _ins(BPF_RET_K, action)


def build_filter() -> bytes:
    """The classic BPF program, as the kernel's array of `struct sock_filter`."""
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    program = [
        _ins(BPF_LD_W_ABS, OFFSET_ARCH),
        _ins(BPF_JEQ_K, AUDIT_ARCH_X86_64, jt=1),
        _ret(SECCOMP_RET_KILL_PROCESS),
        _ins(BPF_LD_W_ABS, OFFSET_NR),  # the accumulator holds nr from here on, on every fall-through
        _ins(BPF_JGE_K, X32_SYSCALL_BIT, jf=1),
        _ret(SECCOMP_RET_KILL_PROCESS),
    ]
    for nr in sorted(DENIED.values()):
        program += [_ins(BPF_JEQ_K, nr, jf=1), _ret(eperm)]
    program += [_ins(BPF_JEQ_K, NR_CLONE3, jf=1), _ret(SECCOMP_RET_ERRNO | errno.ENOSYS)]
    # two argument checks of one shape: [is it this call? load arg0, test, refuse, allow]
    program += [
        _ins(BPF_JEQ_K, NR_SOCKET, jf=4),
        _ins(BPF_LD_W_ABS, OFFSET_ARG0_LOW),  # int domain: the kernel reads the low 32 bits only
        _ins(BPF_JEQ_K, AF_UNIX, jt=1),
        _ret(eperm),
        _ret(SECCOMP_RET_ALLOW),
        _ins(BPF_JEQ_K, NR_CLONE, jf=4),
        _ins(BPF_LD_W_ABS, OFFSET_ARG0_LOW),  # x86_64 clone(flags, ...): the namespace bits are low
        _ins(BPF_JSET_K, CLONE_NEW_ANY, jf=1),
        _ret(eperm),
        _ret(SECCOMP_RET_ALLOW),
        _ret(SECCOMP_RET_ALLOW),
    ]
    return b"".join(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Apply the filter to this process for good. It needs no_new_privs (or CAP_SYS_ADMIN) and a
    single-threaded process: prctl filters only the calling thread, so a thread started earlier would
    escape it. Any failure raises: the converter does not run unfiltered."""
    if platform.machine() != "x86_64":
        raise RuntimeError(f"the converter's seccomp filter is written for x86_64, not {platform.machine()}")
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"the converter has {threads} threads; seccomp must be installed before any start")
    program = build_filter()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
