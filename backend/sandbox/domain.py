"""The one place that turns a run's parameters into libvirt domain XML (from vm_templates/domain.xml)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template
from xml.sax.saxutils import escape

from backend.settings import REPO_ROOT

TEMPLATE_PATH = REPO_ROOT / "vm_templates" / "domain.xml"
DOMAIN_PREFIX = "cleanroom-run-"
METADATA_NS = "https://cleanroom.invalid/sandbox/1"
KERNEL_CMDLINE = "console=ttyS0 quiet loglevel=3 panic=-1 oops=panic init_on_free=1 rdinit=/init"
CPU_BY_VIRT_TYPE = {
    # Under TCG the default CPU model lacks instructions numpy's wheels use ("Illegal instruction").
    "qemu": "<cpu mode='maximum' migratable='off'/>",
    "kvm": "<cpu mode='host-passthrough' migratable='off'/>",
}
# Only the isolation self-test's positive control ever asks for this; runs never do.
POSITIVE_CONTROL_NIC = """
    <interface type='user'>
      <model type='virtio'/>
    </interface>"""


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


def _text(value: object) -> str:
    return escape(str(value), {"'": "&apos;", '"': "&quot;"})


def render_domain_xml(spec: DomainSpec, *, positive_control_nic: bool = False) -> str:
    if spec.virt_type not in CPU_BY_VIRT_TYPE:
        raise ValueError(f"unknown virt type {spec.virt_type!r}")
    if not spec.name.startswith(DOMAIN_PREFIX):
        raise ValueError(f"domain names start with {DOMAIN_PREFIX}")
    cmdline = f"{KERNEL_CMDLINE} {spec.extra_cmdline}".strip()
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
    )
