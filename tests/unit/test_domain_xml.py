"""The rendered run-VM domain: no NIC, no USB/balloon/graphics/sound/host devices/shares, three disks, destroy on exit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from backend.sandbox.domain import DomainSpec, render_domain_xml

FORBIDDEN_DEVICES = {
    "interface",
    "graphics",
    "video",
    "sound",
    "hostdev",
    "filesystem",
    "redirdev",
    "smartcard",
    "channel",
    "vsock",
    "hub",
    "shmem",
    "iommu",
    "tpm",
    "audio",
}


def _spec(virt_type: str = "qemu", name: str = "cleanroom-run-abc123") -> DomainSpec:
    root = Path("/var/cache/cleanroom/images/x")
    run = Path("/var/lib/cleanroom/runs/cleanroom-run-abc123")
    return DomainSpec(
        name=name,
        uuid="6f1c1f3e-2a4b-4c1d-9e1f-0123456789ab",
        run_id="abc123",
        image_hash="f" * 64,
        virt_type=virt_type,
        memory_mib=2560,
        vcpus=2,
        kernel=root / "vmlinuz",
        initrd=root / "initrd.img",
        root_disk=root / "rootfs.squashfs",
        job_disk=run / "job.img",
        output_disk=run / "out.img",
        console_log=run / "console.log",
    )


def _rendered(virt_type: str = "qemu") -> ET.Element:
    return ET.fromstring(render_domain_xml(_spec(virt_type)))


@pytest.mark.parametrize("virt_type", ["qemu", "kvm"])
def test_run_domain_has_no_network_interface_and_no_forbidden_devices(virt_type: str) -> None:
    domain = _rendered(virt_type)
    assert domain.findall(".//interface") == []
    devices = domain.find("devices")
    assert devices is not None
    present = {child.tag for child in devices}
    assert present & FORBIDDEN_DEVICES == set()
    assert present <= {"disk", "controller", "memballoon", "serial", "rng"}


def test_usb_and_balloon_are_explicitly_disabled() -> None:
    devices = _rendered().find("devices")
    controllers = devices.findall("controller")
    assert [(c.get("type"), c.get("model")) for c in controllers] == [("usb", "none")]
    balloons = devices.findall("memballoon")
    assert [b.get("model") for b in balloons] == ["none"]


def test_three_disks_root_and_job_read_only_output_writable() -> None:
    disks = _rendered().find("devices").findall("disk")
    by_target = {d.find("target").get("dev"): d for d in disks}
    assert sorted(by_target) == ["vda", "vdb", "vdc"]
    root, job, out = by_target["vda"], by_target["vdb"], by_target["vdc"]
    assert root.find("source").get("file").endswith("rootfs.squashfs")
    assert root.find("readonly") is not None
    assert job.find("source").get("file").endswith("/job.img")
    assert job.find("readonly") is not None
    assert out.find("source").get("file").endswith("/out.img")
    assert out.find("readonly") is None
    for disk in disks:
        assert disk.get("type") == "file"
        assert disk.get("device") == "disk"
        assert disk.find("target").get("bus") == "virtio"


def test_direct_kernel_boot_and_destroy_on_every_exit() -> None:
    domain = _rendered()
    os_el = domain.find("os")
    assert os_el.find("kernel").text.endswith("vmlinuz")
    assert os_el.find("initrd").text.endswith("initrd.img")
    assert os_el.find("boot") is None
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        assert domain.find(event).text == "destroy"


def test_tcg_uses_cpu_mode_maximum_and_kvm_host_passthrough() -> None:
    tcg = _rendered("qemu")
    assert tcg.get("type") == "qemu"
    assert tcg.find("cpu").get("mode") == "maximum"
    kvm = _rendered("kvm")
    assert kvm.get("type") == "kvm"
    assert kvm.find("cpu").get("mode") == "host-passthrough"


def test_only_the_selftest_positive_control_adds_a_nic() -> None:
    with_nic = ET.fromstring(render_domain_xml(_spec(), positive_control_nic=True))
    interfaces = with_nic.findall(".//interface")
    assert [i.get("type") for i in interfaces] == ["user"]


def test_names_outside_the_run_prefix_are_refused() -> None:
    with pytest.raises(ValueError):
        render_domain_xml(_spec(name="someone-else"))
    with pytest.raises(ValueError):
        render_domain_xml(_spec(virt_type="xen"))


def test_values_are_escaped() -> None:
    spec = _spec()
    hostile = DomainSpec(**{**spec.__dict__, "console_log": Path("/tmp/a'><interface type='user'/>")})
    domain = ET.fromstring(render_domain_xml(hostile))
    assert domain.findall(".//interface") == []
