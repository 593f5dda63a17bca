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


def test_without_guest_ids_there_is_no_seclabel() -> None:
    """A session libvirt (or the KVM probe) keeps libvirt's default QEMU user."""
    assert _rendered().findall("seclabel") == []


def test_guest_ids_become_a_static_dac_seclabel_that_relabels_nothing() -> None:
    spec = DomainSpec(**{**_spec().__dict__, "guest_ids": (70002, 70002)})
    labels = ET.fromstring(render_domain_xml(spec)).findall("seclabel")
    assert [(s.get("type"), s.get("model"), s.get("relabel")) for s in labels] == [("static", "dac", "no")]
    assert labels[0].find("label").text == "+70002:+70002"
    for bad in ((0, 70002), (70002, 0), (-1, 5)):
        with pytest.raises(ValueError):
            render_domain_xml(DomainSpec(**{**spec.__dict__, "guest_ids": bad}))


def test_a_slots_saved_state_is_for_its_guest_ids(monkeypatch, tmp_path: Path) -> None:
    """States saved before per-slot uids (or under another base) no longer match and are remade."""
    from backend import filemodes
    from backend.sandbox.image import ImageInfo
    from backend.sandbox.slots import Slot

    image = ImageInfo("r", "f" * 64, tmp_path, "6.1", "now", 1)
    slot = Slot(1, image, "qemu")
    monkeypatch.setattr(filemodes, "guest_identity", lambda index: None)
    before = slot.config_hash()
    monkeypatch.setattr(filemodes, "guest_identity", lambda index: (70000 + index, 70000 + index))
    assert slot.guest_ids == (70001, 70001)
    ours = slot.config_hash()
    monkeypatch.setattr(filemodes, "guest_identity", lambda index: (80000 + index, 80000 + index))
    assert len({before, ours, slot.config_hash()}) == 3


def test_guest_ids_are_per_index_and_refuse_numbers_someone_has(monkeypatch) -> None:
    from backend import filemodes
    from backend.settings import get_settings

    monkeypatch.setattr(filemodes, "qemu_identity", lambda: (64055, 64055))
    base = get_settings().guest_uid_base
    assert filemodes.guest_identity(0) == (base, base)
    assert filemodes.guest_identity(3) == (base + 3, base + 3)
    with pytest.raises(ValueError):
        filemodes.guest_identity(get_settings().saved_state_slots + filemodes.COLD_GUEST_IDS)
    monkeypatch.setattr(get_settings(), "guest_uid_base", 65534)  # nobody / nogroup (the positive control)
    filemodes._check_unused.cache_clear()
    with pytest.raises(RuntimeError, match="nobody|nogroup"):
        filemodes.guest_identity(0)
    filemodes._check_unused.cache_clear()
