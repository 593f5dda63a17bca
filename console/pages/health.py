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
        with theme.frame("System health"):
            body = ui.column().classes("w-full gap-4")
            ui.button("Refresh", icon="refresh", on_click=lambda: load()).props("flat")

        async def load() -> None:
            await widgets.load_into(body, session.api().health, render, "Checking the runner…")

        await ui.context.client.connected()
        await load()
        return None


def render(health: dict[str, Any]) -> None:
    with ui.card().classes("w-full").mark("health"), ui.grid(columns=2).classes("gap-x-8 gap-y-2"):
        ui.label("Virtualization").classes("text-grey-7")
        virt = health.get("virt_type")
        ui.label(VIRT.get(virt, str(virt or "unknown"))).classes("font-medium").mark("virt")
        ui.label("Guest image sha256").classes("text-grey-7")
        ui.label(str(health.get("image_hash") or "not built yet")).classes("font-mono text-sm").mark("image")
        ui.label("Warm saved state").classes("text-grey-7")
        saved = health.get("saved_state")
        ui.label("—" if saved is None else str(saved))
        ui.label("Runs waiting in the queue").classes("text-grey-7")
        ui.label(widgets.number(health.get("queue_length"))).mark("queue")
        ui.label("VMs running now").classes("text-grey-7")
        running = widgets.number(health.get("running_vms"))
        cap = health.get("max_concurrent_vms")
        ui.label(f"{running} of at most {cap}" if cap is not None else running).mark("running-vms")
        ui.label("Database").classes("text-grey-7")
        ui.label(str(health.get("database") or "—"))
