"""Health (admin): how runs are isolated on this host and how busy the runner is."""

from __future__ import annotations

from typing import Any

from fastapi.responses import RedirectResponse
from nicegui import ui

from console import session, theme, widgets

VIRT = {
    "kvm": "KVM: hardware virtualization",
    "qemu": "software emulation (QEMU TCG): isolated, but slower",
}


def register() -> None:
    @ui.page("/health")
    async def health_page() -> RedirectResponse | None:
        if redirect := session.redirect_if_signed_out("/health", admin=True):
            return redirect
        api = session.api()
        with theme.frame("System health"):
            body = ui.column().classes("w-full gap-4")
            ui.button("Refresh", icon="refresh", on_click=lambda: load()).props("flat")

        async def load() -> None:
            await widgets.load_into(body, api.health, render, "Checking the runner…")

        await ui.context.client.connected()
        await load()
        return None


def saved_state_text(saved: Any) -> str:
    if not isinstance(saved, dict):
        return "—" if saved is None else str(saved)
    if not saved.get("enabled"):
        return "off: every run boots cold"
    return f"{saved.get('ready', 0)} of {saved.get('slots', 0)} warm slots ready"


def render(health: dict[str, Any]) -> None:
    problem = health.get("error") or health.get("libvirt_error")
    if problem:
        widgets.error_box(f"The VM runner reports a problem: {problem}")
    with ui.card().classes("w-full").mark("health"), ui.grid(columns="auto 1fr").classes("gap-x-8 gap-y-2"):
        ui.label("Virtualization").classes("text-grey-7")
        virt = health.get("virt_type")
        ui.label(VIRT.get(virt, str(virt or "unknown (no guest image or libvirt unavailable)"))).classes(
            "font-medium"
        ).mark("virt")
        ui.label("Guest image sha256").classes("text-grey-7")
        ui.label(str(health.get("image_hash") or "not built yet")).classes("font-mono text-sm").mark("image")
        ui.label("Warm saved state").classes("text-grey-7")
        ui.label(saved_state_text(health.get("saved_state")))
        ui.label("Runs waiting in the queue").classes("text-grey-7")
        ui.label(widgets.number(health.get("queue_length"))).mark("queue")
        ui.label("VMs running now").classes("text-grey-7")
        running = health.get("running_vms")
        if running is None:
            running = health.get("running_runs")
        cap = health.get("max_concurrent_vms")
        text = widgets.number(running)
        ui.label(f"{text} of at most {cap}" if cap is not None else text).mark("running-vms")
        ui.label("Database").classes("text-grey-7")
        ui.label(str(health.get("database") or "—"))
