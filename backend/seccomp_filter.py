"""The one seccomp-BPF generator: the converter child's filter (backend/convert/seccomp.py) and the filter the
guest agent puts on user code (vm_templates/image/cleanroom-agent) are both made here.

Standard library only, and no import of the `backend` package: the guest image has Debian's python3 and none
of our code, so the image build copies this very file beside the agent (backend/sandbox/image.py, which counts
it in the recipe hash: changing it rebuilds the image) and the agent loads it by path.

A hand-built classic BPF program (no libseccomp), for x86_64 only:

* a foreign architecture (32-bit `int 0x80` calls report i386) kills the process: the numbers below are
  x86_64's and mean something else there, so anything else would be fail-open; x32 numbers (bit 30) are
  killed or refused with ENOSYS, as the caller chooses;
* DENIED_SYSCALLS fail with EPERM, so a library that tries simply sees an error: io_uring (its operations
  bypass seccomp), bpf, userfaultfd, perf_event_open, kexec, the key rings, every way to mount, swap,
  reboot, unshare/setns, ptrace, another process's memory (process_vm_readv/writev), file handles
  (name_to_handle_at, open_by_handle_at: the "shocker" way to open any inode of a bound filesystem) and
  module loading;
* clone() asking for a new namespace fails with EPERM (another way to unshare); clone3() passes its flags in
  memory a filter cannot read, so it fails with ENOSYS and glibc falls back to clone();
* optionally, socket() for any family but those allowed fails with EPERM (the converter: AF_UNIX only).

Everything else is allowed.
"""

import ctypes
import os
import struct

# <linux/audit.h>, <linux/seccomp.h>, <linux/filter.h>, asm/unistd_64.h
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
EPERM, ENOSYS = 1, 38
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
BPF_MAXINSNS = 4096
SECCOMP_DATA_NR, SECCOMP_DATA_ARCH, SECCOMP_DATA_ARG0_LOW = 0, 4, 16  # struct seccomp_data, little endian
PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS = 38, 39

SYS_SOCKET, SYS_CLONE, SYS_SECCOMP, SYS_CLONE3 = 41, 56, 317, 435
AF_UNIX = 1
CLONE_NEWTIME, CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00000080, 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
CLONE_NAMESPACES = (
    CLONE_NEWTIME
    | CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)

DENIED_SYSCALLS = {  # x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl)
    "ptrace": 101,
    "pivot_root": 155,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
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
ACTIONS = {
    "allow": SECCOMP_RET_ALLOW,
    "eperm": SECCOMP_RET_ERRNO | EPERM,
    "enosys": SECCOMP_RET_ERRNO | ENOSYS,
    "kill": SECCOMP_RET_KILL_PROCESS,
}


def syscall_filter(x32="kill", socket_families=None):
    """The filter as classic BPF (code, jt, jf, k) instructions: the architecture first, then x32 numbers
    (`x32`: "kill" or "enosys"), the refused numbers, clone3, socket's family when `socket_families` names the
    allowed ones, and clone's namespace flags; everything else is allowed."""
    if x32 not in ("kill", "enosys"):
        raise ValueError(f"x32 calls are killed or refused with ENOSYS, not {x32!r}")
    program = []  # jump targets are labels here, offsets once the layout is known

    def emit(code, k, jt=None, jf=None):
        program.append((code, jt, jf, k))

    emit(BPF_LD_W_ABS, SECCOMP_DATA_ARCH)
    emit(BPF_JEQ_K, AUDIT_ARCH_X86_64, jf="kill")
    emit(BPF_LD_W_ABS, SECCOMP_DATA_NR)  # the accumulator holds nr from here on, until an argument is loaded
    emit(BPF_JGE_K, X32_SYSCALL_BIT, jt=x32)
    for nr in sorted(set(DENIED_SYSCALLS.values())):
        emit(BPF_JEQ_K, nr, jt="eperm")
    emit(BPF_JEQ_K, SYS_CLONE3, jt="enosys")
    if socket_families is not None:
        families = sorted(set(socket_families))
        emit(BPF_JEQ_K, SYS_SOCKET, jf="clone")
        emit(BPF_LD_W_ABS, SECCOMP_DATA_ARG0_LOW)  # int domain: the kernel reads the low 32 bits only
        for family in families:
            emit(BPF_JEQ_K, family, jt="allow")
        emit(BPF_RET_K, ACTIONS["eperm"])
    clone_at = len(program)
    emit(BPF_JEQ_K, SYS_CLONE, jf="allow")
    emit(BPF_LD_W_ABS, SECCOMP_DATA_ARG0_LOW)  # clone(flags, ...): the namespace bits are in the low 32
    emit(BPF_JSET_K, CLONE_NAMESPACES, jt="eperm", jf="allow")
    labels = {name: len(program) + i for i, name in enumerate(ACTIONS)}
    labels["clone"] = clone_at
    for action in ACTIONS.values():
        emit(BPF_RET_K, action)

    def offset(index, label):
        return 0 if label is None else labels[label] - index - 1

    resolved = [(code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(program)]
    if len(resolved) > BPF_MAXINSNS or any(max(jt, jf) > 255 for _c, jt, jf, _k in resolved):
        raise ValueError("the syscall filter does not fit classic BPF")
    return resolved


def pack(program):
    """The kernel's array of `struct sock_filter` {u16 code; u8 jt; u8 jf; u32 k}."""
    return b"".join(struct.pack("=HBBI", *insn) for insn in program)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program):
    """No new privileges (set here, checked), then `program` on every thread of this process (TSYNC: a thread
    started earlier does not escape it), for good and for everything it starts. Any failure raises: the caller
    does not run unfiltered."""
    if os.uname().machine != "x86_64":
        raise OSError(f"no syscall filter for {os.uname().machine}: it is written for x86_64")
    libc = ctypes.CDLL(None, use_errno=True)
    ulong = ctypes.c_ulong
    no_new_privs = libc.prctl(PR_SET_NO_NEW_PRIVS, ulong(1), ulong(0), ulong(0), ulong(0))
    if no_new_privs != 0 or libc.prctl(PR_GET_NO_NEW_PRIVS, ulong(0), ulong(0), ulong(0), ulong(0)) != 1:
        err = ctypes.get_errno()
        raise OSError(err, f"PR_SET_NO_NEW_PRIVS: {os.strerror(err)}")
    raw = ctypes.create_string_buffer(pack(program))
    fprog = SockFprog(len(program), ctypes.addressof(raw))
    args = (SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC)
    res = libc.syscall(*(ctypes.c_long(a) for a in args), ctypes.byref(fprog))
    if res != 0:  # with TSYNC a positive result names a thread that could not take the filter
        err = ctypes.get_errno() if res < 0 else 0
        raise OSError(err, f"seccomp filter not installed ({res}): {os.strerror(err)}")
