"""One seccomp-filter generator (backend/seccomp_filter.py) for the converter child and the guest agent (issue 26,
item 6): both programs are its output, it needs nothing the guest lacks, and the image carries it beside the
agent, counted in the recipe hash. The kernel's own verdicts are checked elsewhere: the converter's in
tests/convert/test_converter_sandbox.py, the agent's on this host in tests/sandbox/test_guest_agent.py and in a
real guest in tests/sandbox/test_guest_syscalls.py."""

from __future__ import annotations

import ast
import errno
import importlib.machinery
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from backend import seccomp_filter as bpf
from backend.convert import seccomp as converter_seccomp
from backend.sandbox import image
from backend.settings import REPO_ROOT

AF_INET, AF_INET6, AF_NETLINK = 2, 10, 16
EPERM = bpf.SECCOMP_RET_ERRNO | errno.EPERM
ENOSYS = bpf.SECCOMP_RET_ERRNO | errno.ENOSYS


def load_agent(path: Path) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("cleanroom_agent_under_test", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def verdict(program: list[tuple[int, int, int, int]], nr: int, arg0: int = 0, x32: bool = False) -> int:
    """Classic BPF evaluated on one x86_64 seccomp_data, as the kernel does, for the opcodes the filter uses."""
    data = {
        bpf.SECCOMP_DATA_NR: (nr | (bpf.X32_SYSCALL_BIT if x32 else 0)) & 0xFFFFFFFF,
        bpf.SECCOMP_DATA_ARCH: bpf.AUDIT_ARCH_X86_64,
        bpf.SECCOMP_DATA_ARG0_LOW: arg0 & 0xFFFFFFFF,
    }
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == bpf.BPF_RET_K:
            return k
        if code == bpf.BPF_LD_W_ABS:
            acc, pc = data[k], pc + 1
            continue
        taken = {bpf.BPF_JEQ_K: acc == k, bpf.BPF_JGE_K: acc >= k, bpf.BPF_JSET_K: bool(acc & k)}[code]
        pc += 1 + (jt if taken else jf)


def unpack(raw: bytes) -> list[tuple[int, int, int, int]]:
    import struct

    return [struct.unpack("=HBBI", raw[i : i + 8]) for i in range(0, len(raw), 8)]


@pytest.fixture(scope="module")
def agent() -> ModuleType:
    return load_agent(image.RECIPE_DIR / "cleanroom-agent")


def test_the_agent_and_the_converter_filter_with_the_same_generator(agent: ModuleType) -> None:
    assert Path(agent.seccomp_filter.__file__).resolve() == Path(bpf.__file__).resolve()
    assert agent.syscall_filter() == bpf.syscall_filter(x32="enosys")
    assert converter_seccomp.build_filter() == bpf.pack(bpf.syscall_filter(x32="kill", socket_families=(1,)))
    assert agent.DENIED_SYSCALLS is agent.seccomp_filter.DENIED_SYSCALLS  # one list, not a copy to drift


def test_the_two_policies_differ_only_where_chosen(agent: ModuleType) -> None:
    """Both refuse every listed call and namespace clone and send clone3 to ENOSYS; the converter alone limits
    socket() to AF_UNIX and kills an x32 call, which the guest refuses with ENOSYS."""
    guest, converter = agent.syscall_filter(), unpack(converter_seccomp.build_filter())
    for program in (guest, converter):
        for name, nr in bpf.DENIED_SYSCALLS.items():
            assert verdict(program, nr) == EPERM, name
        assert verdict(program, bpf.SYS_CLONE3) == ENOSYS
        assert verdict(program, bpf.SYS_CLONE, arg0=0x01200011) == bpf.SECCOMP_RET_ALLOW  # fork
        for flag in ("NEWUSER", "NEWNET", "NEWNS", "NEWPID", "NEWTIME"):
            assert verdict(program, bpf.SYS_CLONE, arg0=0x11 | getattr(bpf, f"CLONE_{flag}")) == EPERM, flag
        for nr in (0, 1, 2, 9, 57, 59, 231):  # read write open mmap fork execve exit_group
            assert verdict(program, nr) == bpf.SECCOMP_RET_ALLOW, nr
        assert verdict(program, bpf.SYS_SOCKET, arg0=bpf.AF_UNIX) == bpf.SECCOMP_RET_ALLOW
    for family in (AF_INET, AF_INET6, AF_NETLINK):
        assert verdict(converter, bpf.SYS_SOCKET, arg0=family) == EPERM, family
        assert verdict(guest, bpf.SYS_SOCKET, arg0=family) == bpf.SECCOMP_RET_ALLOW, family  # no NIC there
    assert verdict(converter, 39, x32=True) == bpf.SECCOMP_RET_KILL_PROCESS
    assert verdict(guest, 39, x32=True) == ENOSYS
    with pytest.raises(ValueError):
        bpf.syscall_filter(x32="allow")


def foreign_imports(path: Path) -> list[str]:
    """What a file imports beyond Python's standard library (what Debian's python3 in the guest has)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return [
        name for name in names if name.startswith(".") or name.split(".")[0] not in sys.stdlib_module_names
    ]


def test_the_generator_needs_only_the_standard_library(tmp_path: Path) -> None:
    """The guest has no `backend` package and no third-party module but Debian's. Control: the same check
    finds an import of ours and a third-party one."""
    assert foreign_imports(Path(bpf.__file__)) == []
    planted = tmp_path / "planted.py"
    planted.write_text(
        Path(bpf.__file__).read_text() + "\nfrom backend.settings import REPO_ROOT\nimport pydantic\n"
    )
    assert foreign_imports(planted) == ["backend.settings", "pydantic"]


def test_in_the_image_layout_the_agent_loads_the_generator_beside_it(tmp_path: Path) -> None:
    """The image build's own step (`install_agent`) into an empty /usr/local/sbin: the agent loads the copy
    beside it, not the checkout's. Control: without that copy (and no checkout two levels up), it refuses to
    load at all rather than run user code unfiltered."""
    sbin = tmp_path / "usr" / "local" / "sbin"
    agent_path = image.install_agent(sbin)
    assert sorted(p.name for p in sbin.iterdir()) == ["cleanroom-agent", "seccomp_filter.py"]
    assert (sbin / "seccomp_filter.py").stat().st_mode & 0o777 == 0o600
    loaded = load_agent(agent_path)
    assert Path(loaded.seccomp_filter.__file__) == sbin / "seccomp_filter.py"
    assert loaded.syscall_filter() == bpf.syscall_filter(x32="enosys")

    (sbin / "seccomp_filter.py").unlink()
    with pytest.raises(ImportError, match="seccomp_filter.py is not beside"):
        load_agent(agent_path)


def test_the_generator_is_part_of_the_image_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing the generator changes the recipe hash, so the guest image is rebuilt with it. Control: an
    unchanged copy keeps the hash."""
    before = image.recipe_hash()
    copy = tmp_path / "seccomp_filter.py"
    shutil.copyfile(REPO_ROOT / "backend" / "seccomp_filter.py", copy)
    monkeypatch.setattr(image, "AGENT_FILES", {"seccomp_filter.py": copy})
    assert image.recipe_hash() == before
    copy.write_text(copy.read_text() + "\n# changed\n")
    assert image.recipe_hash() != before
