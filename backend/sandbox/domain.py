"""The one place that turns a run's parameters into libvirt domain XML (from vm_templates/domain.xml)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template
from xml.sax.saxutils import escape

from backend.sandbox import wire
from backend.sandbox.image import ImageInfo
from backend.sandbox.models import MAX_ACTIONS_BYTES, MAX_OUTPUT_BYTES
from backend.sandbox.output import stdout_cap
from backend.settings import REPO_ROOT, get_settings

TEMPLATE_PATH = REPO_ROOT / "vm_templates" / "domain.xml"
DOMAIN_PREFIX = "cleanroom-run-"
METADATA_NS = "https://cleanroom.invalid/sandbox/1"
KERNEL_CMDLINE = "console=ttyS0 quiet loglevel=3 panic=-1 oops=panic init_on_free=1 rdinit=/init"
CPU_BY_VIRT_TYPE = {
    # Under TCG the default CPU model lacks instructions numpy's wheels use ("Illegal instruction").
    "qemu": "<cpu mode='maximum' migratable='off'/>",
    "kvm": "<cpu mode='host-passthrough' migratable='off'/>",
}
RUN_FILES = ("job.img", "out.img", "console.log")  # in each guest's per-run directory
GUEST_OVERHEAD_MIB = 512  # kernel, agent and tmpfs roots on top of the user's memory limit
# Only the isolation self-test's positive control ever asks for this; runs never do.
# The guest's own QEMU uid/gid (backend/filemodes.py). relabel='no': libvirt chowns none of its files; the
# service made the per-run disks the guest's own, and the image files are world-readable.
SECLABEL = """
  <seclabel type='static' model='dac' relabel='no'>
    <label>+{uid}:+{gid}</label>
  </seclabel>"""
POSITIVE_CONTROL_NIC = """
    <interface type='user'>
      <model type='virtio'/>
    </interface>"""


def host_prefix() -> str:
    """This host's domain names: `cleanroom-run-` plus `<host id>-` under a fleet worker, so two workers on
    one machine never share a domain or slot name (host ids are letters, digits and underscores)."""
    host = get_settings().host_id
    return f"{DOMAIN_PREFIX}{host}-" if host else DOMAIN_PREFIX


@dataclass(frozen=True)
class DomainSpec:
    name: str
    uuid: str
    run_id: str
    image_hash: str
    virt_type: str
    memory_mib: int
    vcpus: int
    kernel: Path
    initrd: Path
    root_disk: Path
    job_disk: Path
    output_disk: Path
    console_log: Path
    extra_cmdline: str = ""
    owner: str = ""  # "pid:starttime" of the process running it; leftovers are those whose owner is gone
    guest_ids: tuple[int, int] | None = None  # the uid/gid its QEMU runs as; None: libvirt's default user

    @classmethod
    def for_run(
        cls,
        name: str,
        uuid: str,
        run_id: str,
        image: ImageInfo,
        virt_type: str,
        workdir: Path,
        owner: str,
        guest_ids: tuple[int, int] | None = None,
    ) -> DomainSpec:
        """A run guest: the operator's memory and vCPU caps, the image, the per-run files in `workdir`."""
        job_disk, output_disk, console_log = (workdir / file for file in RUN_FILES)
        return cls(
            name=name,
            uuid=uuid,
            run_id=run_id,
            image_hash=image.image_hash,
            virt_type=virt_type,
            memory_mib=guest_memory_mib(),
            vcpus=guest_vcpus(virt_type),
            kernel=image.kernel,
            initrd=image.initrd,
            root_disk=image.rootfs,
            job_disk=job_disk,
            output_disk=output_disk,
            console_log=console_log,
            owner=owner,
            guest_ids=guest_ids,
        )


def guest_vcpus(virt_type: str) -> int:
    """The vCPUs a guest has: the operator's cap under KVM, `tcg_vcpus` (at most the cap) under TCG."""
    s = get_settings()
    return max(1, min(s.max_vcpus, s.tcg_vcpus)) if virt_type == "qemu" else s.max_vcpus


def guest_memory_mib() -> int:
    return get_settings().max_memory_mib + GUEST_OVERHEAD_MIB


def job_disk_bytes() -> int:
    return get_settings().job_disk_mib * 1024 * 1024


def output_disk_bytes() -> int:
    return wire.output_disk_bytes(stdout_cap(), MAX_OUTPUT_BYTES, MAX_ACTIONS_BYTES)


def _text(value: object) -> str:
    return escape(str(value), {"'": "&apos;", '"': "&quot;"})


def render_domain_xml(spec: DomainSpec, *, positive_control_nic: bool = False) -> str:
    if spec.virt_type not in CPU_BY_VIRT_TYPE:
        raise ValueError(f"unknown virt type {spec.virt_type!r}")
    if not spec.name.startswith(DOMAIN_PREFIX):
        raise ValueError(f"domain names start with {DOMAIN_PREFIX}")
    cmdline = f"{KERNEL_CMDLINE} {spec.extra_cmdline}".strip()
    seclabel = ""
    if spec.guest_ids is not None:
        uid, gid = (int(number) for number in spec.guest_ids)
        if uid <= 0 or gid <= 0:
            raise ValueError("a guest never runs as root")
        seclabel = SECLABEL.format(uid=uid, gid=gid)
    template = Template(TEMPLATE_PATH.read_text())
    return template.substitute(
        virt_type=spec.virt_type,
        name=_text(spec.name),
        uuid=_text(spec.uuid),
        run_id=_text(spec.run_id),
        image_hash=_text(spec.image_hash),
        owner=_text(spec.owner),
        memory_mib=int(spec.memory_mib),
        vcpus=int(spec.vcpus),
        kernel=_text(spec.kernel),
        initrd=_text(spec.initrd),
        cmdline=_text(cmdline),
        cpu=CPU_BY_VIRT_TYPE[spec.virt_type],
        root_disk=_text(spec.root_disk),
        job_disk=_text(spec.job_disk),
        output_disk=_text(spec.output_disk),
        console_log=_text(spec.console_log),
        positive_control_nic=POSITIVE_CONTROL_NIC if positive_control_nic else "",
        seclabel=seclabel,
    )
